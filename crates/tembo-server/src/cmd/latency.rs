//! LATENCY LATEST | HISTORY | RESET | GRAPH | DOCTOR | HISTOGRAM | HELP.

use super::{CmdError, CmdResult, Spec};
use crate::exec::{now_ms, Ctx};
use crate::latency;
use crate::resp::Reply;

pub const COMMANDS: &[Spec] = &[Spec {
    name: "latency",
    arity: -2,
    flags: &["admin", "noscript", "loading", "stale"],
    keys: (0, 0, 0),
    group: "server",
    summary:
        "LATENCY LATEST | HISTORY event | RESET [event ...] | GRAPH event | DOCTOR | HISTOGRAM [command ...] | HELP.",
    run: latency_cmd,
}];

fn latency_cmd(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let sub = String::from_utf8_lossy(&a[1]).to_ascii_lowercase();
    let words = |from: usize| a[from..].iter().map(|w| String::from_utf8_lossy(w).into_owned()).collect::<Vec<_>>();
    let fixed = |n: usize| {
        if a.len() == n {
            Ok(())
        } else {
            Err(CmdError::arity(&format!("latency|{sub}")))
        }
    };
    let now = now_ms() / 1000;
    let m = &mut cx.st.latency;
    match sub.as_str() {
        "latest" => {
            fixed(2)?;
            Ok(Reply::Array(
                m.latest()
                    .into_iter()
                    .map(|(e, t, v, max)| {
                        Reply::Array(vec![
                            Reply::bulk(e),
                            Reply::Int(t as i64),
                            Reply::Int(v as i64),
                            Reply::Int(max as i64),
                        ])
                    })
                    .collect(),
            ))
        }
        "history" => {
            fixed(3)?;
            let event = String::from_utf8_lossy(&a[2]);
            Ok(Reply::Array(
                m.history(&event)
                    .into_iter()
                    .map(|(t, v)| Reply::Array(vec![Reply::Int(t as i64), Reply::Int(v as i64)]))
                    .collect(),
            ))
        }
        "reset" => Ok(Reply::Int(m.reset(&words(2)) as i64)),
        "graph" => {
            fixed(3)?;
            let event = String::from_utf8_lossy(&a[2]);
            match m.graph(&event, now) {
                Some(g) => Ok(Reply::Verbatim(g)),
                None => Err(CmdError::err(format!("No samples available for event '{event}'"))),
            }
        }
        "doctor" => {
            fixed(2)?;
            Ok(Reply::Verbatim(m.doctor()))
        }
        "histogram" => Ok(histogram(cx, &words(2))),
        "help" => {
            fixed(2)?;
            Ok(super::help(&[
                "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "DOCTOR",
                "    Return a human readable latency analysis report.",
                "GRAPH <event>",
                "    Return an ASCII latency graph for the <event> class.",
                "HISTORY <event>",
                "    Return time-latency samples for the <event> class.",
                "LATEST",
                "    Return the latest latency samples for all events.",
                "RESET [<event> ...]",
                "    Reset latency data of one or more <event> classes.",
                "    (default: reset all data for all event classes)",
                "HISTOGRAM [COMMAND ...]",
                "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
                "    If no commands are specified then all histograms are replied.",
                "HELP",
                "    Print this help.",
            ]))
        }
        _ => Err(super::subcommand_error(a, "LATENCY")),
    }
}

/// LATENCY HISTOGRAM [command …]: per command (a container names all its
/// subcommands), its calls and the cumulative count per power of two of
/// microseconds; unknown names are skipped, as in Redis.
fn histogram(cx: &mut Ctx, names: &[String]) -> Reply {
    let stats = cx.st.stats.per_command_sorted();
    let wanted = |full: &str| {
        names.is_empty()
            || names.iter().any(|n| {
                let n = n.to_ascii_lowercase();
                full == n || full.split_once('|').is_some_and(|(parent, _)| parent == n)
            })
    };
    let entries = stats
        .into_iter()
        .filter(|(name, s)| s.calls > 0 && wanted(name))
        .map(|(name, s)| {
            let buckets = latency::cumulative(&s.hist)
                .into_iter()
                .map(|(us, n)| (Reply::Int(us as i64), Reply::Int(n as i64)))
                .collect();
            (
                Reply::bulk(name),
                Reply::Map(vec![
                    (Reply::bulk("calls"), Reply::Int(s.calls as i64)),
                    (Reply::bulk("histogram_usec"), Reply::Map(buckets)),
                ]),
            )
        })
        .collect();
    Reply::Map(entries)
}
