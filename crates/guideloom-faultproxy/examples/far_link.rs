//! A far store for programs outside Rust: a proxy with a [`Link`] in front of an `http://`
//! upstream, on 127.0.0.1, until its standard input closes.
//!
//! ```text
//! cargo run --release -p guideloom-faultproxy --example far_link -- URL RTT_MS [MB_PER_S]
//! ```
//!
//! It prints one line, the proxy's `http://127.0.0.1:PORT`, then serves until stdin reaches
//! its end (the parent closed the pipe or exited), and prints the proxy's counters to stderr.
//! Each line `stats` read from stdin is answered with one line on stdout,
//! `requests=N gets=G bytes_to_client=B connections=C` (counted since the start), so a
//! benchmark can count what an epoch asked for. `python/bench/far_epoch.py` runs it in front
//! of nginx, `python/bench/far_peers.py` in front of moto. Without arguments it prints this
//! usage and exits (as CI's examples step runs it).

use std::io::{BufRead, Write};
use std::time::Duration;

use guideloom_faultproxy::{FaultProxy, Link, Script};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (url, rtt) = match args.as_slice() {
        [url, rtt, ..] => (url.clone(), Duration::from_millis(rtt.parse()?)),
        _ => {
            println!("usage: far_link URL RTT_MS [MB_PER_S]  (serves until stdin closes)");
            return Ok(());
        }
    };
    let mut link = Link::round_trip(rtt);
    if let Some(mb) = args.get(2) {
        link = link.with_rate_to_client(mb.parse::<u64>()? * 1_000_000);
    }
    let proxy = FaultProxy::for_url_with(&url, Script::pass(), link)?;
    let mut out = std::io::stdout();
    writeln!(out, "{}", proxy.url())?;
    out.flush()?;
    for line in std::io::stdin().lock().lines() {
        if line?.trim() == "stats" {
            let stats = proxy.stats();
            let gets = proxy.count(|a| a.exchange.method == "GET");
            writeln!(
                out,
                "requests={} gets={gets} bytes_to_client={} connections={}",
                stats.requests, stats.bytes_to_client, stats.connections
            )?;
            out.flush()?;
        }
    }
    eprintln!("far_link: {:?}", proxy.stats());
    Ok(())
}
