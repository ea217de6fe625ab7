//! `version -k0s [-pre]`: the newest k0s release, from the version index k0sctl reads
//! (cmd/version.go; `stable.txt`, with -pre `latest.txt`, of K0SFORM_K0S_VERSION_URL).

use super::{Failure, mirror};
use crate::download;
use crate::k0s::release::{self, Channel};
use crate::version::K0sVersion;

/// The newest k0s release on `channel`, as the mirror's version index names it.
pub fn newest_k0s(channel: Channel) -> Result<K0sVersion, Failure> {
    let m = mirror()?;
    let url = m.version_index_url(channel);
    download::fetch_text(&url, download::TEXT_TIMEOUT)
        .and_then(|t| {
            release::parse_version_index(&t).map_err(|e| {
                // Named without the credentials the URL may carry.
                format!("{}: {e}", crate::k0s::redact::hide_url_credentials(&url))
            })
        })
        .map_err(Failure::error)
}
