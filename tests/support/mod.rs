//! Fixtures shared by the test modules: the lab (`lab`, `e2e`), a plain sshd (`sshd`), a real etcd
//! (`etcd`), child processes of this test binary (`child`), sample states (`states`), the rule
//! for tests that need a lab, sshd or etcd (`prereq`, `require_lab!`), the one way to run the
//! k0sform binary (`bin`), the Rust lexer of the tests that read the source (`rust_lex`), the
//! checked-in JSON Schemas (`schema_files`), and where proptest keeps failing cases
//! (`proptest_files`).

pub mod bin;
pub mod child;
pub mod e2e;
pub mod etcd;
pub mod lab;
pub mod prereq;
pub mod proptest_files;
pub mod rust_lex;
pub mod schema_files;
pub mod sshd;
pub mod states;
