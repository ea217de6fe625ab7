//! A host is identified by address and port together: k0sctl's own smoke tests run several hosts on
//! 127.0.0.1 with different ports.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
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

/// A list of hosts indexed once by address and port, for callers that look up many hosts
/// (`Spec::host`, `State::host` and `Reality::get` scan the list: once per host, that is
/// quadratic in hosts). The first entry of an address wins, as those scans find it; a lookup
/// allocates nothing. Borrowed: built from the list as it is, it is never stale.
#[derive(Debug)]
pub struct HostIndex<'a, T> {
    by_address: HashMap<(&'a str, u16), &'a T>,
}

impl<'a, T> HostIndex<'a, T> {
    pub fn new(entries: impl IntoIterator<Item = ((&'a str, u16), &'a T)>) -> Self {
        let mut by_address = HashMap::new();
        for (k, v) in entries {
            by_address.entry(k).or_insert(v);
        }
        HostIndex { by_address }
    }

    pub fn get(&self, id: &HostId) -> Option<&'a T> {
        self.at(&id.address, id.port)
    }

    pub fn at(&self, address: &str, port: u16) -> Option<&'a T> {
        self.by_address.get(&(address, port)).copied()
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

    #[test]
    fn index_finds_the_first_entry_of_an_address() {
        let list = [
            ("10.0.0.1", 22, 'a'),
            ("10.0.0.1", 2222, 'b'),
            ("10.0.0.1", 22, 'c'),
        ];
        let idx = HostIndex::new(list.iter().map(|(a, p, v)| ((*a, *p), v)));
        assert_eq!(idx.get(&HostId::new("10.0.0.1", 22)), Some(&'a'));
        assert_eq!(idx.at("10.0.0.1", 2222), Some(&'b'));
        assert_eq!(idx.at("10.0.0.2", 22), None);
    }
}
