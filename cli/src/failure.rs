//! The command line's error: what to print, and the exit code.
//!
//! Every subcommand returns `Result<(), Failure>`; `main` prints the message and exits with
//! the code. The codes: 1 a runtime failure (the layout's time ran out, a store that cannot
//! be reached, an interrupted run), 2 bad usage or input (an unparsable ID, an unknown preset,
//! a node out of range), and 0 for a quiet end that is no failure (the reader of standard
//! output went away: `monoflake gen | head`).
//!
//! This module sits below every other one of the CLI and imports none of them.

use std::io;

use monoflake::Error;

/// A failed command: what to print and the exit code.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    /// Bad usage or input: exit code 2.
    pub fn usage(message: &str) -> Self {
        Failure {
            code: 2,
            message: message.to_owned(),
        }
    }
}

impl From<Error> for Failure {
    /// The library's message, and the command line's way to act on it where there is one.
    fn from(e: Error) -> Self {
        let code = if e.is_bad_input() { 2 } else { 1 };
        let mut message = e.to_string();
        match e {
            Error::LegacyReservation { .. } => {
                message.push_str("; with monoflake: `monoflake state migrate --state-dir DIR`");
            }
            Error::ReservationAhead { .. } => {
                message.push_str(" (with monoflake: --trust-reservation)");
            }
            _ => {}
        }
        Failure { code, message }
    }
}

impl From<io::Error> for Failure {
    /// A closed pipe (`monoflake gen | head`) is not a failure: code 0 ends the command
    /// quietly.
    fn from(e: io::Error) -> Self {
        if e.kind() == io::ErrorKind::BrokenPipe {
            return Failure {
                code: 0,
                message: String::new(),
            };
        }
        Failure {
            code: 1,
            message: format!("cannot write output: {e}"),
        }
    }
}
