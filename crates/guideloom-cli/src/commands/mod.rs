//! One module per subcommand.

pub(crate) mod annotate;
pub(crate) mod annotations;
pub(crate) mod bench;
pub(crate) mod card;
pub(crate) mod compact;
pub(crate) mod convert;
pub(crate) mod export;
pub(crate) mod import;
pub(crate) mod info;
pub(crate) mod keep;
pub(crate) mod publish;
pub(crate) mod quickstart;
pub(crate) mod read;
pub(crate) mod serve;
pub(crate) mod verify;
pub(crate) mod write;
