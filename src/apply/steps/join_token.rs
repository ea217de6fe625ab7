//! A join token as a value (`JoinToken`, never shown) and a worker token shared by the joins
//! running at the same time (`SharedToken`); `tokens` creates, shares and invalidates them.

use std::sync::Arc;

/// A join token. Deliberately neither `Display` nor a readable `Debug`: it goes to the joining
/// host as a 0600 file and nowhere else.
pub(super) struct JoinToken(pub(super) String);

impl std::fmt::Debug for JoinToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JoinToken(<redacted>)")
    }
}

/// A worker join token shared by the worker joins running at the same time through one
/// controller, as k0sctl shares one token among the workers it installs: the first join creates
/// it, the last one to finish invalidates it. Controller tokens are never shared.
pub(super) struct SharedToken {
    pub(super) token: Arc<JoinToken>,
    pub(super) id: String,
    pub(super) users: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_debug_is_redacted() {
        let t = JoinToken("H4sIAAAA-secret".into());
        assert_eq!(format!("{t:?}"), "JoinToken(<redacted>)");
    }
}
