//! Test support (feature `test-support`): a throw-away CA issuing certificates with chosen SANs,
//! written as the PEM files the services read. Used by the component tests of every service.

use std::{
    net::IpAddr,
    path::{Path, PathBuf},
};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};

use crate::tls::TlsFiles;

/// Generating or writing test certificates failed.
#[derive(Debug, thiserror::Error)]
pub enum TestCertError {
    /// rcgen refused the parameters.
    #[error("certificate generation failed")]
    Generate(#[from] rcgen::Error),
    /// A file could not be written.
    #[error("cannot write {path}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// A self-signed test certificate authority.
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl std::fmt::Debug for TestCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCa").finish_non_exhaustive()
    }
}

/// A leaf certificate and its key, PEM encoded.
#[derive(Debug, Clone)]
pub struct TestCert {
    /// The certificate.
    pub cert_pem: String,
    /// The PKCS#8 private key.
    pub key_pem: String,
}

impl TestCa {
    /// A new CA with the given common name.
    pub fn new(common_name: &str) -> Result<Self, TestCertError> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate()?)?;
        Ok(Self { issuer })
    }

    /// The CA certificate (the trust bundle).
    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// Issues a leaf usable as server and client certificate. Each name becomes a SAN: an IP
    /// address SAN if it parses as one, a URI SAN if it contains `://`, a DNS SAN otherwise.
    pub fn issue(&self, names: &[&str]) -> Result<TestCert, TestCertError> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        if let Some(first) = names.first() {
            params.distinguished_name.push(DnType::CommonName, *first);
        }
        for name in names {
            let san = if let Ok(ip) = name.parse::<IpAddr>() {
                SanType::IpAddress(ip)
            } else if name.contains("://") {
                SanType::URI((*name).try_into()?)
            } else {
                SanType::DnsName((*name).try_into()?)
            };
            params.subject_alt_names.push(san);
        }
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(TestCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// Writes `ca.pem`, `<name>.pem` and `<name>-key.pem` into `dir` and returns their paths.
/// Rewriting them later (same paths) is how tests rotate certificates.
pub fn write_tls_files(
    dir: &Path,
    name: &str,
    ca_pem: &str,
    cert: &TestCert,
) -> Result<TlsFiles, TestCertError> {
    let files = TlsFiles {
        ca: dir.join(format!("{name}-ca.pem")),
        cert: dir.join(format!("{name}.pem")),
        key: dir.join(format!("{name}-key.pem")),
    };
    for (path, contents) in [
        (&files.ca, ca_pem),
        (&files.cert, cert.cert_pem.as_str()),
        (&files.key, cert.key_pem.as_str()),
    ] {
        write_atomically(path, contents)?;
    }
    Ok(files)
}

/// Writes via a temporary file and a rename, as Kubernetes Secret volume updates do, so a reader
/// never sees a half-written file.
fn write_atomically(path: &Path, contents: &str) -> Result<(), TestCertError> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, contents)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|source| TestCertError::Write {
            path: path.to_owned(),
            source,
        })
}
