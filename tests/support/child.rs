//! A child process running one test of this very test binary (a module's `child_process_entry`)
//! in a given mode: the crash and lock tests' writer/holder processes.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdout, Command, Stdio};

pub struct ChildProc {
    child: Child,
    stdout: BufReader<ChildStdout>,
}

impl ChildProc {
    /// Run the test `entry` (its full name, e.g. `state::child_process_entry`) with
    /// `mode_env=mode` and the extra environment `env`.
    pub fn start(entry: &str, mode_env: &str, mode: &str, env: &[(&str, String)]) -> Self {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args([entry, "--exact", "--nocapture", "--test-threads=1"])
            .env(mode_env, mode);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        ChildProc { child, stdout }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Read lines until one contains `prefix`; return the rest of it.
    pub fn wait_for(&mut self, prefix: &str) -> String {
        let mut line = String::new();
        loop {
            line.clear();
            if self.stdout.read_line(&mut line).unwrap() == 0 {
                let mut err = String::new();
                let _ =
                    std::io::Read::read_to_string(self.child.stderr.as_mut().unwrap(), &mut err);
                panic!("child ended before printing {prefix}: {err}");
            }
            // libtest prints "test <entry> ... " before the child's first line.
            if let Some((_, rest)) = line.split_once(prefix) {
                return rest.trim().to_string();
            }
        }
    }

    /// Send one line to the child's stdin.
    pub fn say(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// SIGKILL: no destructors, no cleanup, like a crash or `kill -9`.
    pub fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// Close stdin (the child finishes what it holds and exits) and wait for it.
    pub fn finish(mut self) {
        drop(self.child.stdin.take());
        let status = self.child.wait().unwrap();
        assert!(status.success(), "child failed: {status}");
    }
}
