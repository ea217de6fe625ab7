//! `k0sform init [ADDRESS…]`: print a starting k0sctl.yaml (`ops::init`), the addresses from
//! the arguments and from stdin when it is not a terminal.

use crate::cli::InitArgs;
use crate::exit::Exit;
use crate::ops::{self, Failure};
use std::io::{IsTerminal, Read};

pub fn run(args: &InitArgs) -> Exit {
    let mut lines = Vec::new();
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        let mut text = String::new();
        if let Err(e) = stdin.lock().read_to_string(&mut text) {
            return Failure::error(format!("cannot read addresses from stdin: {e}")).exit();
        }
        lines.extend(text.lines().map(str::to_string));
    }
    lines.extend(args.addresses.iter().cloned());
    match ops::init::spec_yaml(args, &lines) {
        Ok(yaml) => {
            print!("{yaml}");
            Exit::Success
        }
        Err(e) => Failure::error(e).exit(),
    }
}
