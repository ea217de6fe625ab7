//! A host is identified by address and port together: k0sctl's own smoke tests run several hosts on
//! 127.0.0.1 with different ports.

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct HostId {
    pub address: String,
    pub port: u16,
}

impl HostId {
    pub fn new(address: impl Into<String>, port: u16) -> Self {
        HostId {
            address: address.into(),
            port,
        }
    }

    /// Does a user-given selector (`ADDR` or `ADDR:PORT`) name this host?
    pub fn matches(&self, selector: &str) -> bool {
        if selector == self.address {
            return true;
        }
        match selector.rsplit_once(':') {
            Some((addr, port)) => {
                addr.trim_matches(['[', ']']) == self.address && port.parse() == Ok(self.port)
            }
            None => false,
        }
    }
}

impl fmt::Display for HostId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.port == 22 {
            write!(f, "{}", self.address)
        } else if self.address.contains(':') {
            write!(f, "[{}]:{}", self.address, self.port)
        } else {
            write!(f, "{}:{}", self.address, self.port)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selector_matching() {
        let h = HostId::new("127.0.0.1", 9022);
        assert!(h.matches("127.0.0.1"));
        assert!(h.matches("127.0.0.1:9022"));
        assert!(!h.matches("127.0.0.1:9023"));
        assert!(!h.matches("127.0.0.2"));
        assert_eq!(h.to_string(), "127.0.0.1:9022");
        assert_eq!(HostId::new("10.0.0.1", 22).to_string(), "10.0.0.1");
    }
}
