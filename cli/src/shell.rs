//! `monoflake completions SHELL` and `monoflake manpage`, generated from the argument parser
//! itself so that they never fall out of step with it.

use std::io::{self, Write};

use clap::CommandFactory;

use crate::args::{Cli, CompletionsArgs, ManpageArgs};
use crate::failure::Failure;

pub fn completions(args: &CompletionsArgs) -> Result<(), Failure> {
    let mut out = io::BufWriter::new(io::stdout().lock());
    clap_complete::generate(args.shell, &mut Cli::command(), "monoflake", &mut out);
    Ok(out.flush()?)
}

pub fn manpage(args: &ManpageArgs) -> Result<(), Failure> {
    let command = Cli::command();
    match &args.dir {
        Some(dir) => clap_mangen::generate_to(command, dir).map_err(|e| Failure {
            code: 1,
            message: format!("cannot write manual pages to {}: {e}", dir.display()),
        }),
        None => {
            let mut out = io::BufWriter::new(io::stdout().lock());
            clap_mangen::Man::new(command).render(&mut out)?;
            Ok(out.flush()?)
        }
    }
}
