//! rustls mTLS configuration from PEM files, reloaded when the files change.
//!
//! A [`TlsStore`] holds the current [`TlsMaterial`]: a server configuration that *requires* a client
//! certificate signed by the CA bundle, and a client configuration that presents our certificate
//! and trusts only that CA bundle (plus, for the HTTPS metrics server, a server configuration with
//! the same certificate that asks for no client certificate). Every new connection (server accept
//! or client connect) takes a snapshot of the current material, so a rotated certificate is used by
//! the next connection without a restart while established connections keep the configuration
//! they were made with.
//! The reloader polls the three files every `--tls-reload-interval`; it compares their bytes
//! (robust against Kubernetes' atomic symlink swaps of mounted Secrets, which inotify watches on
//! the file itself miss). A change that does not load (e.g. a key written after its certificate)
//! keeps the previous material and is retried on the next change.

use std::{
    path::{Path, PathBuf},
    sync::{Arc, Mutex, PoisonError, RwLock},
    time::Duration,
};

use metrics::counter;
use rustls::{
    ClientConfig, RootCertStore, ServerConfig,
    client::WebPkiServerVerifier,
    crypto::CryptoProvider,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
    server::WebPkiClientVerifier,
};
use tokio::{sync::watch, task::JoinHandle};
use tokio_util::sync::CancellationToken;

use crate::metrics::TLS_RELOADS_TOTAL;

/// ALPN protocol of gRPC.
const ALPN_H2: &[u8] = b"h2";
/// ALPN protocol of the HTTPS metrics server (HTTP/1.1 only, like the admin port).
const ALPN_HTTP1: &[u8] = b"http/1.1";

/// Paths of the three PEM files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// CA bundle trusted for peers.
    pub ca: PathBuf,
    /// Our certificate chain, leaf first.
    pub cert: PathBuf,
    /// Our private key.
    pub key: PathBuf,
}

/// Loading the TLS material failed.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A file is not valid PEM.
    #[error("{path}: invalid PEM")]
    Pem {
        /// The file.
        path: PathBuf,
        /// The decoder's complaint.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// A certificate file holds no certificate.
    #[error("{path}: no certificate found")]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
    /// A CA certificate was rejected as a trust anchor.
    #[error("{path}: unusable CA certificate")]
    TrustAnchor {
        /// The file.
        path: PathBuf,
        /// The reason.
        #[source]
        source: rustls::Error,
    },
    /// The private key is unusable or does not match the certificate.
    #[error("{key}: private key unusable with {cert}")]
    Key {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// The reason.
        #[source]
        source: rustls::Error,
    },
    /// The crypto provider does not support the default protocol versions.
    #[error("crypto provider cannot build a TLS configuration")]
    Protocol(#[source] rustls::Error),
    /// The client-certificate verifier could not be built from the CA bundle.
    #[error("cannot build the client certificate verifier")]
    ClientVerifier(#[source] rustls::server::VerifierBuilderError),
    /// The server-certificate verifier could not be built from the CA bundle.
    #[error("cannot build the server certificate verifier")]
    ServerVerifier(#[source] rustls::server::VerifierBuilderError),
}

/// The configurations built from one version of the files.
#[derive(Debug)]
pub struct TlsMaterial {
    /// Server side: our certificate, client certificates required and verified against the CA.
    pub server: Arc<ServerConfig>,
    /// Server side of HTTPS endpoints whose clients authenticate otherwise (secure metrics: a
    /// bearer token): our certificate, no client certificate asked for, HTTP/1.1
    /// (docs/design/architecture.md#secure-metrics).
    pub https: Arc<ServerConfig>,
    /// Client side: our certificate presented, servers verified against the CA.
    pub client: Arc<ClientConfig>,
    /// DER of our leaf certificate (to tell versions apart in logs and tests).
    pub leaf: CertificateDer<'static>,
}

#[derive(Debug, PartialEq, Eq)]
struct FileBytes {
    ca: Vec<u8>,
    cert: Vec<u8>,
    key: Vec<u8>,
}

/// The current TLS material plus what is needed to reload it.
#[derive(Debug)]
pub struct TlsStore {
    files: TlsFiles,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<TlsMaterial>>,
    /// Bytes of the last version looked at (loaded or rejected), to detect the next change.
    last_seen: Mutex<FileBytes>,
    generation: watch::Sender<u64>,
}

/// The process-default crypto provider, or ring when none is installed.
pub fn crypto_provider() -> Arc<CryptoProvider> {
    CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()))
}

impl TlsStore {
    /// Loads the files once; fails if they are not a usable set.
    pub fn load(files: TlsFiles) -> Result<Arc<Self>, TlsError> {
        let provider = crypto_provider();
        let bytes = read_files(&files)?;
        let material = build_material(&files, &bytes, &provider)?;
        Ok(Arc::new(Self {
            files,
            provider,
            current: RwLock::new(Arc::new(material)),
            last_seen: Mutex::new(bytes),
            generation: watch::channel(0).0,
        }))
    }

    /// The files this store was loaded from.
    pub fn files(&self) -> &TlsFiles {
        &self.files
    }

    /// A snapshot of the current material, for one new connection.
    pub fn current(&self) -> Arc<TlsMaterial> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Number of successful reloads so far.
    pub fn generation(&self) -> u64 {
        *self.generation.borrow()
    }

    /// A receiver notified after every successful reload.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// Re-reads the files; when they changed and load, the new material becomes current.
    /// Returns whether a new version was installed. A changed set that fails to load is reported
    /// once and not retried until the files change again.
    fn reload_if_changed(&self) -> Result<bool, TlsError> {
        let bytes = read_files(&self.files)?;
        {
            let mut last = self
                .last_seen
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if *last == bytes {
                return Ok(false);
            }
            let built = build_material(&self.files, &bytes, &self.provider);
            *last = bytes;
            let material = built?;
            *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(material);
        }
        self.generation.send_modify(|generation| *generation += 1);
        Ok(true)
    }

    /// Polls the files every `interval` until `shutdown` is cancelled.
    pub fn spawn_reloader(
        self: &Arc<Self>,
        interval: Duration,
        shutdown: CancellationToken,
    ) -> JoinHandle<()> {
        let store = Arc::clone(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    () = shutdown.cancelled() => return,
                }
                let worker = Arc::clone(&store);
                let outcome = tokio::task::spawn_blocking(move || worker.reload_if_changed()).await;
                match outcome {
                    Ok(Ok(true)) => {
                        counter!(TLS_RELOADS_TOTAL, "result" => "success").increment(1);
                        tracing::info!(cert = %store.files.cert.display(), "TLS certificates reloaded");
                    }
                    Ok(Ok(false)) => {}
                    Ok(Err(error)) => {
                        counter!(TLS_RELOADS_TOTAL, "result" => "error").increment(1);
                        tracing::warn!(error = %error_chain(&error), "TLS files changed but cannot be loaded; keeping the previous certificates");
                    }
                    Err(error) => tracing::error!(%error, "TLS reload task failed"),
                }
            }
        })
    }
}

/// Renders an error with its sources, `outer: inner: …`, each cause once: the core's one printer
/// (docs/design/architecture.md#failure-handling), re-exported for the services.
pub use pacto_contract::error_chain;

fn read_file(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_owned(),
        source,
    })
}

fn read_files(files: &TlsFiles) -> Result<FileBytes, TlsError> {
    Ok(FileBytes {
        ca: read_file(&files.ca)?,
        cert: read_file(&files.cert)?,
        key: read_file(&files.key)?,
    })
}

fn parse_certs(path: &Path, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| TlsError::Pem {
            path: path.to_owned(),
            source,
        })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            path: path.to_owned(),
        });
    }
    Ok(certs)
}

fn build_material(
    files: &TlsFiles,
    bytes: &FileBytes,
    provider: &Arc<CryptoProvider>,
) -> Result<TlsMaterial, TlsError> {
    let ca_certs = parse_certs(&files.ca, &bytes.ca)?;
    let mut roots = RootCertStore::empty();
    for cert in ca_certs {
        roots.add(cert).map_err(|source| TlsError::TrustAnchor {
            path: files.ca.clone(),
            source,
        })?;
    }
    let roots = Arc::new(roots);
    let chain = parse_certs(&files.cert, &bytes.cert)?;
    let key = PrivateKeyDer::from_pem_slice(&bytes.key).map_err(|source| TlsError::Pem {
        path: files.key.clone(),
        source,
    })?;
    let key_error = |source| TlsError::Key {
        cert: files.cert.clone(),
        key: files.key.clone(),
        source,
    };
    let certified = rustls::sign::CertifiedKey::from_der(chain.clone(), key.clone_key(), provider)
        .map_err(key_error)?;
    let leaf = certified.cert[0].clone();

    let client_verifier =
        WebPkiClientVerifier::builder_with_provider(Arc::clone(&roots), Arc::clone(provider))
            .build()
            .map_err(TlsError::ClientVerifier)?;
    let mut server = ServerConfig::builder_with_provider(Arc::clone(provider))
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Protocol)?
        .with_client_cert_verifier(client_verifier)
        .with_single_cert(chain.clone(), key.clone_key())
        .map_err(key_error)?;
    server.alpn_protocols = vec![ALPN_H2.to_vec()];

    let mut https = ServerConfig::builder_with_provider(Arc::clone(provider))
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Protocol)?
        .with_no_client_auth()
        .with_single_cert(chain.clone(), key.clone_key())
        .map_err(key_error)?;
    https.alpn_protocols = vec![ALPN_HTTP1.to_vec()];

    let server_verifier =
        WebPkiServerVerifier::builder_with_provider(Arc::clone(&roots), Arc::clone(provider))
            .build()
            .map_err(TlsError::ServerVerifier)?;
    let mut client = ClientConfig::builder_with_provider(Arc::clone(provider))
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Protocol)?
        .with_webpki_verifier(server_verifier)
        .with_client_auth_cert(chain, key)
        .map_err(key_error)?;
    client.alpn_protocols = vec![ALPN_H2.to_vec()];

    Ok(TlsMaterial {
        server: Arc::new(server),
        https: Arc::new(https),
        client: Arc::new(client),
        leaf,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{TestCa, write_tls_files};

    #[test]
    fn reload_installs_changed_files_and_keeps_the_old_set_on_errors() {
        let dir = tempfile::tempdir().unwrap();
        let ca = TestCa::new("ca").unwrap();
        let first = ca.issue(&["a.pacto.svc"]).unwrap();
        let files = write_tls_files(dir.path(), "svc", &ca.pem(), &first).unwrap();
        let store = TlsStore::load(files.clone()).unwrap();
        let first_leaf = store.current().leaf.clone();
        assert!(
            !store.reload_if_changed().unwrap(),
            "unchanged files are not reloaded"
        );

        // A certificate written before its key: the pair does not match, the old set stays.
        let second = ca.issue(&["a.pacto.svc"]).unwrap();
        std::fs::write(&files.cert, &second.cert_pem).unwrap();
        let error = store.reload_if_changed().unwrap_err();
        assert!(matches!(error, TlsError::Key { .. }), "{error:?}");
        assert_eq!(store.current().leaf, first_leaf);
        assert_eq!(store.generation(), 0);

        // Then the key arrives: the new pair is installed.
        std::fs::write(&files.key, &second.key_pem).unwrap();
        assert!(store.reload_if_changed().unwrap());
        assert_ne!(store.current().leaf, first_leaf);
        assert_eq!(store.generation(), 1);

        // Garbage in the CA file is reported with its path.
        std::fs::write(&files.ca, "not pem").unwrap();
        let error = store.reload_if_changed().unwrap_err();
        assert!(
            error_chain(&error).contains("svc-ca.pem"),
            "{}",
            error_chain(&error)
        );
    }

    #[test]
    fn load_fails_on_missing_files() {
        let dir = tempfile::tempdir().unwrap();
        let files = TlsFiles {
            ca: dir.path().join("ca.pem"),
            cert: dir.path().join("cert.pem"),
            key: dir.path().join("key.pem"),
        };
        let error = TlsStore::load(files).unwrap_err();
        assert!(matches!(error, TlsError::Read { .. }), "{error:?}");
    }
}
