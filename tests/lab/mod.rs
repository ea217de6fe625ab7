//! Pins the test lab (hosts look like separate machines over real SSH) and the fidelity of the
//! k0s test double against the samples in testdata/reference/k0s-cli.md, including the etcd membership
//! failures that must happen for real. Needs root; run with `cargo test --test k0sform lab::`.

mod cli;
mod etcd;
mod hosts;
mod workers;

use crate::support::lab::{self, Lab, LabOptions, SpecOptions, stderr, stdout};
use crate::support::prereq::require_lab;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

const K0S_LOG: &str = "/var/lib/k0s/logs/k0scontroller.log";

fn members(lab: &Lab, host: &str) -> serde_json::Value {
    let out = lab.ssh_ok(host, "timeout 10 k0s etcd member-list");
    assert!(
        out.ends_with("}\n") && out.lines().count() == 1,
        "one compact line: {out:?}"
    );
    serde_json::from_str(&out).expect("member-list JSON")
}

fn member_names(lab: &Lab, host: &str) -> BTreeSet<String> {
    members(lab, host)["members"]
        .as_object()
        .expect("members map")
        .keys()
        .cloned()
        .collect()
}

fn uid(lab: &Lab, host: &str) -> String {
    lab.ssh_ok(
        host,
        "k0s kubectl get namespace kube-system -o jsonpath={.metadata.uid}",
    )
}

fn wait_ready(lab: &Lab, host: &str) {
    let ok = lab.wait_until(Duration::from_secs(40), || {
        let o = lab.ssh(host, "k0s kubectl get --raw=/readyz");
        o.status.success() && stdout(&o) == "ok"
    });
    assert!(ok, "{host} never became ready; log:\n{}", log(lab, host));
}

fn log(lab: &Lab, host: &str) -> String {
    stdout(&lab.exec(host, &format!("cat {K0S_LOG}")))
}

fn bootstrap(lab: &Lab, host: &str) {
    lab.install_double(host);
    lab.ssh_ok(host, "k0s install controller && k0s start");
    wait_ready(lab, host);
}

/// Token from `via`, written to /etc/k0s/k0stoken on `host`, installed with --token-file, started.
fn start_joining(lab: &Lab, via: &str, host: &str, role: &str) {
    lab.install_double(host);
    let token = lab.ssh_ok(via, &format!("k0s token create --role {role} --expiry 1h"));
    lab.ssh_ok(
        host,
        &format!(
            "mkdir -p /etc/k0s && echo {} > /etc/k0s/k0stoken && chmod 600 /etc/k0s/k0stoken",
            token.trim()
        ),
    );
    lab.ssh_ok(
        host,
        &format!("k0s install {role} --token-file /etc/k0s/k0stoken && k0s start"),
    );
}

/// Waits until the service process on `host` has exited (a failed join ends the process).
fn wait_exited(lab: &Lab, host: &str, timeout: Duration) -> bool {
    lab.wait_until(timeout, || !lab.ssh(host, "k0s status").status.success())
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

fn decode_token(token: &str) -> String {
    use base64::Engine as _;
    use std::io::Read as _;
    let gz = base64::engine::general_purpose::STANDARD
        .decode(token)
        .expect("base64 token");
    let mut s = String::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_string(&mut s)
        .expect("gzip token");
    s
}
