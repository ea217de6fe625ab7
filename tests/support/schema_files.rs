//! The checked-in JSON Schemas in `schema/`, each generated from the types it describes.

use std::path::Path;

/// `schema/<name>` must be `now` (the schema the types generate today); with
/// `K0SFORM_UPDATE_SCHEMA` set it is written first. A stale one fails naming `test`, the test
/// that regenerates it. Returns the checked-in text.
pub fn checked_in(name: &str, now: &str, test: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("schema")
        .join(name);
    if std::env::var_os("K0SFORM_UPDATE_SCHEMA").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, now).unwrap();
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == now,
        "schema/{name} is stale; regenerate it with \
         `K0SFORM_UPDATE_SCHEMA=1 cargo test --test k0sform {test}`"
    );
    checked_in
}
