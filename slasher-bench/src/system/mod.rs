//! What a run needs from the machine it runs on: where it runs ([`environment`]), what it
//! measures besides time ([`measure`]), writing reports safely ([`outdir`]), finding and
//! removing the databases it made ([`clean`]) and the signals that stop it ([`interrupt`]).

pub mod clean;
pub mod environment;
pub mod interrupt;
pub mod measure;
pub mod outdir;
