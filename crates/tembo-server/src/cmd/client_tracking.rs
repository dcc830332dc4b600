//! CLIENT TRACKING, CACHING, GETREDIR and TRACKINGINFO: the client side of
//! `crate::tracking`, with Redis 7.0's options, checks and words.

use super::args::{int, is};
use super::{CmdError, CmdResult};
use crate::exec::Ctx;
use crate::resp::Reply;
use crate::tracking::ClientTracking;

/// CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX p ...] [BCAST] [OPTIN]
/// [OPTOUT] [NOLOOP].
pub fn tracking(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let (mut redirect, mut bcast, mut optin, mut optout, mut noloop) = (0u64, false, false, false, false);
    let mut prefixes: Vec<Vec<u8>> = Vec::new();
    let mut j = 3;
    while j < a.len() {
        let more = j + 1 < a.len();
        if is(&a[j], "redirect") && more {
            j += 1;
            if redirect != 0 {
                return Err(CmdError::err("A client can only redirect to a single other client"));
            }
            let id = int(&a[j])?;
            if id <= 0 || (id as u64 != cx.client.id && !cx.st.clients.contains_key(&(id as u64))) {
                return Err(CmdError::err("The client ID you want redirect to does not exist"));
            }
            redirect = id as u64;
        } else if is(&a[j], "bcast") {
            bcast = true;
        } else if is(&a[j], "optin") {
            optin = true;
        } else if is(&a[j], "optout") {
            optout = true;
        } else if is(&a[j], "noloop") {
            noloop = true;
        } else if is(&a[j], "prefix") && more {
            j += 1;
            prefixes.push(a[j].clone());
        } else {
            return Err(CmdError::syntax());
        }
        j += 1;
    }
    if is(&a[2], "off") {
        disable(cx);
        return Ok(Reply::ok());
    }
    if !is(&a[2], "on") {
        return Err(CmdError::syntax());
    }
    let old = &cx.client.tracking;
    if !bcast && !prefixes.is_empty() {
        return Err(CmdError::err("PREFIX option requires BCAST mode to be enabled"));
    }
    if old.on && old.bcast != bcast {
        return Err(CmdError::err(
            "You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.",
        ));
    }
    if bcast && (optin || optout) {
        return Err(CmdError::err("OPTIN and OPTOUT are not compatible with BCAST"));
    }
    if optin && optout {
        return Err(CmdError::err("You can't use both OPTIN and OPTOUT"));
    }
    if (optin && old.optout) || (optout && old.optin) {
        return Err(CmdError::err(
            "You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.",
        ));
    }
    if bcast {
        check_prefixes(&old.prefixes, &prefixes)?;
        if prefixes.is_empty() {
            prefixes.push(Vec::new());
        }
    }
    let id = cx.client.id;
    let t = &mut cx.client.tracking;
    t.on = true;
    t.bcast = bcast;
    t.redirect = redirect;
    t.optin = optin;
    t.optout = optout;
    t.noloop = noloop;
    t.broken_redirect = false;
    for p in prefixes {
        if !t.prefixes.contains(&p) {
            cx.st.tracking.add_prefix(p.clone(), id);
            t.prefixes.push(p);
        }
    }
    Ok(Reply::ok())
}

/// Turns tracking off (CLIENT TRACKING OFF, RESET).
pub fn disable(cx: &mut Ctx) {
    let t = std::mem::take(&mut cx.client.tracking);
    cx.st.tracking.forget_prefixes(&t, cx.client.id);
}

/// A client's BCAST prefixes may not overlap (one a prefix of another).
fn check_prefixes(existing: &[Vec<u8>], new: &[Vec<u8>]) -> Result<(), CmdError> {
    let overlap = |a: &[u8], b: &[u8]| a.starts_with(b) || b.starts_with(a);
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    for (i, p) in new.iter().enumerate() {
        if let Some(e) = existing.iter().find(|e| overlap(e, p)) {
            return Err(CmdError::err(format!(
                "Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                text(p),
                text(e)
            )));
        }
        if let Some(o) = new[i + 1..].iter().find(|o| overlap(o, p)) {
            return Err(CmdError::err(format!(
                "Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                text(p),
                text(o)
            )));
        }
    }
    Ok(())
}

/// CLIENT CACHING YES|NO.
pub fn caching(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let t = &mut cx.client.tracking;
    if !t.on {
        return Err(CmdError::err(
            "CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled",
        ));
    }
    if is(&a[2], "yes") {
        if !t.optin {
            return Err(CmdError::err("CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode."));
        }
        t.caching = Some(true);
    } else if is(&a[2], "no") {
        if !t.optout {
            return Err(CmdError::err("CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode."));
        }
        t.caching = Some(false);
    } else {
        return Err(CmdError::syntax());
    }
    Ok(Reply::ok())
}

/// CLIENT GETREDIR: -1 when not tracking, 0 when not redirecting.
pub fn getredir(cx: &mut Ctx) -> CmdResult {
    let t = &cx.client.tracking;
    Ok(Reply::Int(if t.on { t.redirect as i64 } else { -1 }))
}

/// CLIENT TRACKINGINFO.
pub fn info(cx: &mut Ctx) -> CmdResult {
    let t: &ClientTracking = &cx.client.tracking;
    let mut flags = Vec::new();
    if !t.on {
        flags.push("off");
    } else {
        flags.push("on");
        for (set, name) in [
            (t.bcast, "bcast"),
            (t.optin, "optin"),
            (t.optout, "optout"),
            (t.optin && t.caching == Some(true), "caching-yes"),
            (t.optout && t.caching == Some(false), "caching-no"),
            (t.noloop, "noloop"),
            (t.broken_redirect, "broken_redirect"),
        ] {
            if set {
                flags.push(name);
            }
        }
    }
    Ok(Reply::Map(vec![
        (Reply::bulk("flags"), Reply::Set(flags.into_iter().map(Reply::bulk).collect())),
        (Reply::bulk("redirect"), Reply::Int(if t.on { t.redirect as i64 } else { -1 })),
        (Reply::bulk("prefixes"), Reply::Array(t.prefixes.iter().map(Reply::bulk).collect())),
    ]))
}
