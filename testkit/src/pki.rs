//! The control plane's certificates: one CA that signs the API server's serving certificate and
//! every client certificate (the admin's, the controller manager's, the scheduler's), and the
//! key that signs service-account tokens. ECDSA P-256 throughout; written as PEM files.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

/// A certificate and its key, as PEM files.
#[derive(Debug, Clone)]
pub struct CertFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl CertFiles {
    pub fn cert_pem(&self) -> anyhow::Result<String> {
        std::fs::read_to_string(&self.cert).with_context(|| format!("reading {}", self.cert.display()))
    }

    pub fn key_pem(&self) -> anyhow::Result<String> {
        std::fs::read_to_string(&self.key).with_context(|| format!("reading {}", self.key.display()))
    }
}

/// The CA, kept in memory to sign more certificates (webhook servers, further clients).
pub struct Authority {
    issuer: Issuer<'static, KeyPair>,
    pub files: CertFiles,
}

fn write(dir: &Path, name: &str, cert: &str, key: &str) -> anyhow::Result<CertFiles> {
    let files = CertFiles { cert: dir.join(format!("{name}.crt")), key: dir.join(format!("{name}.key")) };
    std::fs::write(&files.cert, cert).with_context(|| format!("writing {}", files.cert.display()))?;
    std::fs::write(&files.key, key).with_context(|| format!("writing {}", files.key.display()))?;
    Ok(files)
}

fn name(common_name: &str, organization: Option<&str>) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, common_name);
    if let Some(organization) = organization {
        name.push(DnType::OrganizationName, organization);
    }
    name
}

impl Authority {
    /// A new CA written to `dir/ca.crt` and `dir/ca.key`.
    pub fn create(dir: &Path) -> anyhow::Result<Authority> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::default();
        params.distinguished_name = name("lightsout-testkit-ca", None);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let cert = params.self_signed(&key)?;
        let files = write(dir, "ca", &cert.pem(), &key.serialize_pem())?;
        Ok(Authority { issuer: Issuer::new(params, key), files })
    }

    /// A serving certificate for `hosts` (DNS names or IP addresses).
    pub fn serving(&self, dir: &Path, file_name: &str, hosts: &[&str]) -> anyhow::Result<CertFiles> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::default();
        params.distinguished_name = name(hosts.first().copied().unwrap_or("localhost"), None);
        params.subject_alt_names = hosts
            .iter()
            .map(|host| match host.parse() {
                Ok(ip) => Ok(SanType::IpAddress(ip)),
                Err(_) => Ok(SanType::DnsName((*host).try_into()?)),
            })
            .collect::<Result<_, rcgen::Error>>()?;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params.signed_by(&key, &self.issuer)?;
        write(dir, file_name, &cert.pem(), &key.serialize_pem())
    }

    /// A client certificate: the API server reads the user from the common name and the groups
    /// from the organizations.
    pub fn client(&self, dir: &Path, file_name: &str, user: &str, group: Option<&str>) -> anyhow::Result<CertFiles> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::default();
        params.distinguished_name = name(user, group);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params.signed_by(&key, &self.issuer)?;
        write(dir, file_name, &cert.pem(), &key.serialize_pem())
    }
}

/// The key pair that signs service-account tokens: `dir/sa.key` (private, PKCS#8) and `dir/sa.pub`.
pub fn service_account_key(dir: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
    let key = KeyPair::generate()?;
    let private = dir.join("sa.key");
    let public = dir.join("sa.pub");
    std::fs::write(&private, key.serialize_pem()).with_context(|| format!("writing {}", private.display()))?;
    std::fs::write(&public, key.public_key_pem()).with_context(|| format!("writing {}", public.display()))?;
    Ok((private, public))
}
