//! SSH transport (openssh crate): ControlMaster sessions, host-key pinning, quoting, sudo, uploads.
