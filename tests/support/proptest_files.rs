//! Proptest's configuration for the properties whose failing cases are kept in the repository.

use proptest::test_runner::{Config, FileFailurePersistence};

/// `cases` cases, failures kept in `<file>.proptest-regressions` beside the property's source
/// file and replayed from there first. proptest's default (`SourceParallel`) would use
/// `<repo>/proptest-regressions/<path>.txt` instead, as tests/ has a lib.rs.
pub fn regressions_beside_source(cases: u32) -> Config {
    Config {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..Config::default()
    }
}
