//! Certificates and keys for the test control plane: one CA that signs the API server's serving
//! certificate and every client certificate, plus the service-account token signing key pair.
//!
//! Everything is generated in memory with `rcgen` (ECDSA P-256) at start-up; nothing is cached on
//! disk between runs.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// Errors while generating certificates and keys.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("generating a key pair for {what}")]
    GenerateKey {
        what: String,
        #[source]
        source: rcgen::Error,
    },
    #[error("building certificate parameters for {what}")]
    Params {
        what: String,
        #[source]
        source: rcgen::Error,
    },
    #[error("signing the certificate for {what}")]
    Sign {
        what: String,
        #[source]
        source: rcgen::Error,
    },
}

/// A PEM certificate with its PEM (PKCS#8) private key.
#[derive(Clone)]
pub struct CertAndKey {
    pub cert_pem: String,
    pub key_pem: String,
}

impl std::fmt::Debug for CertAndKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertAndKey").finish_non_exhaustive()
    }
}

/// The certificate authority of one control plane.
pub struct Ca {
    params: CertificateParams,
    key: KeyPair,
    cert_pem: String,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ca").finish_non_exhaustive()
    }
}

fn key_pair(what: &str) -> Result<KeyPair, PkiError> {
    KeyPair::generate().map_err(|source| PkiError::GenerateKey {
        what: what.to_owned(),
        source,
    })
}

impl Ca {
    /// Generates a new self-signed CA.
    pub fn generate(common_name: &str) -> Result<Self, PkiError> {
        let what = format!("CA {common_name}");
        let key = key_pair(&what)?;
        let mut params =
            CertificateParams::new(Vec::<String>::new()).map_err(|source| PkiError::Params {
                what: what.clone(),
                source,
            })?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params
            .self_signed(&key)
            .map_err(|source| PkiError::Sign { what, source })?;
        Ok(Self {
            cert_pem: cert.pem(),
            params,
            key,
        })
    }

    /// The CA certificate (PEM).
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CA private key (PEM, PKCS#8).
    pub fn key_pem(&self) -> String {
        self.key.serialize_pem()
    }

    /// Issues a TLS serving certificate for the given DNS names and IP addresses.
    pub fn issue_server(
        &self,
        common_name: &str,
        subject_alt_names: &[&str],
    ) -> Result<CertAndKey, PkiError> {
        let sans: Vec<String> = subject_alt_names.iter().map(|s| (*s).to_owned()).collect();
        self.issue(common_name, &[], sans, ExtendedKeyUsagePurpose::ServerAuth)
    }

    /// Issues a client certificate. Kubernetes maps the common name to the user name and each
    /// organization to a group.
    pub fn issue_client(&self, user: &str, groups: &[&str]) -> Result<CertAndKey, PkiError> {
        self.issue(
            user,
            groups,
            Vec::new(),
            ExtendedKeyUsagePurpose::ClientAuth,
        )
    }

    fn issue(
        &self,
        common_name: &str,
        organizations: &[&str],
        sans: Vec<String>,
        usage: ExtendedKeyUsagePurpose,
    ) -> Result<CertAndKey, PkiError> {
        let what = format!("certificate {common_name}");
        let key = key_pair(&what)?;
        let mut params = CertificateParams::new(sans).map_err(|source| PkiError::Params {
            what: what.clone(),
            source,
        })?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        for org in organizations {
            params
                .distinguished_name
                .push(DnType::OrganizationName, *org);
        }
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![usage];
        params.use_authority_key_identifier_extension = true;
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params
            .signed_by(&key, &issuer)
            .map_err(|source| PkiError::Sign { what, source })?;
        Ok(CertAndKey {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// The key pair the API server signs service-account tokens with (and verifies them against).
pub struct SigningKey {
    pub private_pem: String,
    pub public_pem: String,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey").finish_non_exhaustive()
    }
}

impl SigningKey {
    /// Generates a fresh ECDSA P-256 key pair (tokens are signed with ES256).
    pub fn generate() -> Result<Self, PkiError> {
        let key = key_pair("service-account signing key")?;
        Ok(Self {
            private_pem: key.serialize_pem(),
            public_pem: key.public_key_pem(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issues_pem_certificates_signed_by_the_ca() {
        let ca = Ca::generate("test-ca").unwrap();
        let server = ca.issue_server("srv", &["localhost", "127.0.0.1"]).unwrap();
        let client = ca.issue_client("alice", &["devs", "ops"]).unwrap();
        assert!(ca.cert_pem().starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(server.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(client.key_pem.starts_with("-----BEGIN PRIVATE KEY-----"));
        assert_ne!(server.cert_pem, client.cert_pem);
        let sa = SigningKey::generate().unwrap();
        assert!(sa.public_pem.starts_with("-----BEGIN PUBLIC KEY-----"));
    }
}
