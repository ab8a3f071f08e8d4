//! Arguments of `guideloom serve`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use clap::Args;

use super::RootArg;

/// The port `serve` listens on when neither `--port` nor `--bind IP:PORT` gives one.
pub(crate) const DEFAULT_PORT: u16 = 8000;

/// `guideloom serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    pub(crate) root: RootArg,
    /// The address to listen on: an IP (`127.0.0.1`, `::1`, `0.0.0.0`) or IP:PORT. Default:
    /// 127.0.0.1 (this machine only). The viewer is read-only, but anyone who reaches the
    /// address can read the dataset.
    #[arg(long, value_name = "ADDR", value_parser = parse_bind)]
    pub(crate) bind: Option<SocketAddr>,
    /// The port (0: a free one, printed on the first line). Default: 8000, or the port of
    /// `--bind IP:PORT`.
    #[arg(long, value_name = "PORT")]
    pub(crate) port: Option<u16>,
    /// The snapshot shown by default (else the latest).
    #[arg(long, value_name = "ID")]
    pub(crate) snapshot: Option<String>,
    /// Benchmark results for the bench page: a JSON file (`[{"group", "bench", "median_ns"}]`)
    /// or a directory of criterion output (e.g. `target/criterion` after `cargo xtask bench`).
    #[arg(long, value_name = "PATH")]
    pub(crate) bench: Option<PathBuf>,
}

/// `IP` or `IP:PORT` (port 0 in the result when only an IP is given; see [`ServeArgs::address`]).
fn parse_bind(text: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    text.trim_matches(|c| c == '[' || c == ']')
        .parse::<IpAddr>()
        .map(|ip| SocketAddr::new(ip, 0))
        .map_err(|_| format!("{text:?} is neither an IP address nor IP:PORT"))
}

impl ServeArgs {
    /// The address to bind: `--bind`'s IP (default 127.0.0.1) with `--port`, else
    /// `--bind`'s port when it had one, else [`DEFAULT_PORT`].
    pub(crate) fn address(&self) -> SocketAddr {
        let bind = self
            .bind
            .unwrap_or(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0));
        let port = match (self.port, bind.port()) {
            (Some(p), _) => p,
            (None, 0) => DEFAULT_PORT,
            (None, p) => p,
        };
        SocketAddr::new(bind.ip(), port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(bind: Option<&str>, port: Option<u16>) -> ServeArgs {
        ServeArgs {
            root: RootArg::default(),
            bind: bind.map(|b| parse_bind(b).unwrap()),
            port,
            snapshot: None,
            bench: None,
        }
    }

    #[test]
    fn the_address_defaults_to_loopback_and_port_wins() {
        assert_eq!(args(None, None).address().to_string(), "127.0.0.1:8000");
        assert_eq!(args(None, Some(0)).address().to_string(), "127.0.0.1:0");
        assert_eq!(
            args(Some("0.0.0.0:9000"), None).address().to_string(),
            "0.0.0.0:9000"
        );
        assert_eq!(args(Some("::1"), Some(7)).address().to_string(), "[::1]:7");
        assert!(parse_bind("localhost").is_err());
    }
}
