//! HTTP downloads into the cache: resumable through `.part` files, checked against a
//! sha256 when one is known, renamed into place only when complete.

use crate::error::{Error, Result};
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

/// A download's progress, reported as bytes arrive.
#[derive(Clone, Copy, Debug)]
pub struct Progress<'a> {
    pub file: &'a str,
    pub done: u64,
    pub total: Option<u64>,
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .tls_config(tls())
        .timeout_connect(Some(Duration::from_secs(20)))
        .timeout_recv_response(Some(Duration::from_secs(60)))
        .http_status_as_error(false)
        .build()
        .into()
}

/// TLS as Cargo.toml builds it for this platform: rustls with Mozilla's roots (ureq's
/// default) on Linux, the platform's TLS and certificate store on macOS and Windows.
fn tls() -> ureq::tls::TlsConfig {
    use ureq::tls::TlsConfig;
    if cfg!(any(target_os = "macos", target_os = "ios", windows)) {
        use ureq::tls::{RootCerts, TlsProvider};
        TlsConfig::builder()
            .provider(TlsProvider::NativeTls)
            .root_certs(RootCerts::PlatformVerifier)
            .build()
    } else {
        TlsConfig::default()
    }
}

/// The error for a hub that cannot be reached, saying how to do without it.
fn unreachable(endpoint: &str, what: &str, e: impl std::fmt::Display) -> Error {
    Error::Hub(format!(
        "could not reach {endpoint} to download {what} ({e}). Without network access, \
         download the model file yourself and pass its path instead of the hub id, e.g. \
         `pocketrt run path/to/model.gguf -p ...` (a GGUF file, a pocket package folder or \
         an HF folder); mirrors can be set with POCKETRT_HUB_ENDPOINT"
    ))
}

fn status_error(url: &str, status: u16) -> Error {
    let why = match status {
        401 | 403 => "access denied (gated or private repository?)",
        404 => "not found (check the hub id and file name)",
        _ => "unexpected HTTP status",
    };
    Error::Hub(format!("{url}: {why} ({status})"))
}

/// GET `url` as text (the listing API).
pub fn get_text(url: &str, what: &str, endpoint: &str) -> Result<String> {
    let mut resp = agent()
        .get(url)
        .call()
        .map_err(|e| unreachable(endpoint, what, e))?;
    let status = resp.status().as_u16();
    if status != 200 {
        return Err(status_error(url, status));
    }
    resp.body_mut()
        .with_config()
        .limit(16 << 20)
        .read_to_string()
        .map_err(|e| unreachable(endpoint, what, e))
}

/// The SHA-256 of the file at `path`, as lowercase hex (read 1 MiB at a time).
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(|e| Error::io(path, e))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// Download `url` to `dest` unless it is already there (and matches `sha256`). A `.part`
/// file left by an interrupted download is resumed with an HTTP range request.
pub fn file(
    url: &str,
    dest: &Path,
    sha256: Option<&str>,
    endpoint: &str,
    progress: &mut dyn FnMut(Progress),
) -> Result<()> {
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if dest.exists() && sha256.map_or(Ok(true), |h| sha256_file(dest).map(|got| got == h))? {
        return Ok(());
    }
    let part = dest.with_file_name(format!("{name}.part"));
    let have = std::fs::metadata(&part).map(|m| m.len()).unwrap_or(0);
    let mut req = agent().get(url);
    if have > 0 {
        req = req.header("Range", format!("bytes={have}-"));
    }
    let resp = req.call().map_err(|e| unreachable(endpoint, &name, e))?;
    let status = resp.status().as_u16();
    let resumed = status == 206;
    if status != 200 && !resumed {
        return Err(status_error(url, status));
    }
    let length = resp
        .headers()
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let mut done = if resumed { have } else { 0 };
    let total = length.map(|l| l + done);
    let mut out = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(resumed)
        .truncate(!resumed)
        .open(&part)
        .map_err(|e| Error::io(&part, e))?;
    let mut body = resp.into_body().into_reader();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = body
            .read(&mut buf)
            .map_err(|e| unreachable(endpoint, &name, e))?;
        if n == 0 {
            break;
        }
        out.write_all(&buf[..n]).map_err(|e| Error::io(&part, e))?;
        done += n as u64;
        progress(Progress {
            file: &name,
            done,
            total,
        });
    }
    out.flush().map_err(|e| Error::io(&part, e))?;
    drop(out);
    if let Some(t) = total.filter(|&t| t != done) {
        return Err(Error::Hub(format!(
            "{url}: the download stopped at {done} of {t} bytes; run again to resume"
        )));
    }
    if let Some(want) = sha256 {
        let got = sha256_file(&part)?;
        if got != want {
            std::fs::remove_file(&part).map_err(|e| Error::io(&part, e))?;
            return Err(Error::Hub(format!(
                "{url}: sha256 {got} does not match the expected {want}; the partial file \
                 was removed, run again to download it afresh"
            )));
        }
    }
    std::fs::rename(&part, dest).map_err(|e| Error::io(dest, e))
}
