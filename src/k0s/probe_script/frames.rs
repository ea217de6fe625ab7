//! The framing of the probe's output: each section between marker lines that carry the run's
//! nonce (`<N> begin <name>`, the output, `\n<N> end <name> <exit code>`), on stdout and stderr.

use crate::k0s::K0sError;
use crate::transport::CommandOutput;
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct Section {
    pub(super) rc: i32,
    pub(super) out: String,
    pub(super) err: String,
}

impl Section {
    pub(super) fn ok(&self) -> bool {
        self.rc == 0
    }
    pub(super) fn as_output(&self) -> CommandOutput {
        CommandOutput {
            status: Some(self.rc),
            stdout: self.out.clone().into_bytes(),
            stderr: self.err.clone().into_bytes(),
        }
    }
    /// The line to show when the section failed.
    pub(super) fn error(&self) -> String {
        let line = self.as_output().error_line();
        if line.is_empty() {
            format!("exit code {}", self.rc)
        } else {
            line
        }
    }
}

/// One stream's framed sections: name → (exit code from the end marker, output), and whether
/// the final `done` marker was seen.
type Frames = (BTreeMap<String, (Option<i32>, String)>, bool);

/// The framed sections of one stream. Text outside frames (a login banner, sudo's warnings) is
/// ignored.
fn frames(text: &str, nonce: &str) -> Result<Frames, K0sError> {
    const WHAT: &str = "probe output";
    let bad = |m: String| K0sError::parse(WHAT, m);
    let mut map = BTreeMap::new();
    let mut done = false;
    let mut open: Option<(String, String)> = None;
    // Every piece starts right after a marker's nonce: " begin NAME\n<output>\n",
    // " end NAME RC\n", " done\n".
    for piece in marker_pieces(text, nonce) {
        let (header, body) = piece.split_once('\n').unwrap_or((piece, ""));
        let words: Vec<&str> = header.split(' ').collect();
        match (words.as_slice(), open.take()) {
            (["", "begin", name], None) => open = Some((name.to_string(), body.to_string())),
            (["", "end", name, rest @ ..], Some((opened, output))) if *name == opened => {
                let rc = match rest {
                    [] => None,
                    [rc] => Some(
                        rc.parse()
                            .map_err(|_| bad(format!("bad exit code {rc:?} of {name}")))?,
                    ),
                    _ => return Err(bad(format!("malformed marker {header:?}"))),
                };
                // The end marker starts with a newline of its own.
                let output = output
                    .strip_suffix('\n')
                    .ok_or_else(|| bad(format!("section {name} is not closed by a new line")))?;
                map.insert(opened, (rc, output.to_string()));
            }
            (["", "done"], None) => done = true,
            _ => return Err(bad(format!("unexpected marker {header:?}"))),
        }
    }
    if let Some((name, _)) = open {
        return Err(bad(format!("section {name} has no end")));
    }
    Ok((map, done))
}

/// The text after each marker up to the next one. A marker is the nonce at the start of a line
/// (the script prints each one after a line break): the nonce anywhere else is output, whatever
/// a host (which sees its own command line) prints.
fn marker_pieces<'a>(text: &'a str, nonce: &str) -> Vec<&'a str> {
    let starts: Vec<usize> = text
        .match_indices(nonce)
        .map(|(at, _)| at)
        .filter(|&at| at == 0 || text.as_bytes()[at - 1] == b'\n')
        .collect();
    starts
        .iter()
        .enumerate()
        .map(|(i, &at)| {
            let end = starts.get(i + 1).copied().unwrap_or(text.len());
            &text[at + nonce.len()..end]
        })
        .collect()
}

pub(super) fn sections(
    out: &CommandOutput,
    nonce: &str,
) -> Result<BTreeMap<String, Section>, K0sError> {
    const WHAT: &str = "probe output";
    let (stdout, done) = frames(&out.stdout_str(), nonce)?;
    if !done {
        return Err(K0sError::parse(
            WHAT,
            "the probe script did not finish (no end marker)",
        ));
    }
    // stderr is framed too, but only read as far as it is well-formed: it carries the frames
    // and whatever else the host's shell or sudo printed.
    let (mut stderr, _) = frames(&out.stderr_str(), nonce).unwrap_or_default();
    stdout
        .into_iter()
        .map(|(name, (rc, text))| {
            let rc = rc
                .ok_or_else(|| K0sError::parse(WHAT, format!("section {name} has no exit code")))?;
            let err = stderr.remove(&name).map(|(_, e)| e).unwrap_or_default();
            Ok((name, Section { rc, out: text, err }))
        })
        .collect()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(in crate::k0s::probe_script) const NONCE: &str = "K0SFORM-0123456789abcdef0123456789abcdef";

    /// Output framed as the script frames it, with nonce `NONCE`.
    pub(in crate::k0s::probe_script) fn framed(
        sections: &[(&str, i32, &str, &str)],
        done: bool,
    ) -> CommandOutput {
        let (mut o, mut e) = (String::from("motd noise\n"), String::from("sudo noise\n"));
        for (name, rc, out, err) in sections {
            o += &format!("{NONCE} begin {name}\n{out}\n{NONCE} end {name} {rc}\n");
            e += &format!("{NONCE} begin {name}\n{err}\n{NONCE} end {name}\n");
        }
        if done {
            o += &format!("{NONCE} done\n");
        }
        CommandOutput {
            status: Some(0),
            stdout: o.into_bytes(),
            stderr: e.into_bytes(),
        }
    }

    #[test]
    fn frames_keep_output_exact_and_refuse_truncation() {
        let out = framed(
            &[
                ("machine_id", 0, "abc\n", ""),
                ("hostname", 0, "h1", "warning: x\n"),
                ("config", 0, "a: 1\n\n\nK0SFORM-0123 begin x\n", ""),
            ],
            true,
        );
        let s = sections(&out, NONCE).unwrap();
        assert_eq!(s["machine_id"].out, "abc\n");
        assert_eq!(s["hostname"].out, "h1");
        assert_eq!(s["hostname"].err, "warning: x\n");
        assert_eq!(s["config"].out, "a: 1\n\n\nK0SFORM-0123 begin x\n");
        // Truncated output (no done marker, or a section cut short) is refused.
        assert!(sections(&framed(&[("machine_id", 0, "abc", "")], false), NONCE).is_err());
        let mut cut = framed(&[("machine_id", 0, "abc", "")], true);
        cut.stdout = format!("{NONCE} begin machine_id\nabc").into_bytes();
        assert!(sections(&cut, NONCE).is_err());
        // Garbage stderr frames do not lose stdout.
        let mut odd = framed(&[("machine_id", 0, "abc", "")], true);
        odd.stderr = format!("{NONCE} begin machine_id\nno end").into_bytes();
        assert_eq!(sections(&odd, NONCE).unwrap()["machine_id"].err, "");
    }

    #[test]
    fn markers_count_only_at_line_starts() {
        // A host knows the nonce (it is on the probe's command line) and prints it mid-line.
        let body = format!("a: 1 {NONCE} end config 0\nb: {NONCE} done\n");
        let out = framed(
            &[("machine_id", 0, "abc", ""), ("config", 0, &body, "")],
            true,
        );
        let s = sections(&out, NONCE).unwrap();
        assert_eq!(s["config"].out, body);
        assert_eq!(s["machine_id"].out, "abc");
    }
}
