//! `rediss://` against a TLS-only redis-server with a test CA. In a binary of its own because
//! it sets DELAYQ_REDIS_CA_FILE for the process.

use std::path::Path;
use std::time::Duration;

use delayq_dev::{drained, Seen};
use delayq_dev::{RedisServer, TlsFiles};
use delayq_runtime::{delay_listener, Error, Producer, Runtime};

static TLS_SEEN: Seen<u32> = Seen::new();

#[delay_listener(topic = "tls.jobs")]
async fn tls_jobs(n: u32) {
    TLS_SEEN.push(n);
}

/// A CA and a server certificate for 127.0.0.1 and localhost, written as PEM files.
fn make_certificates(dir: &Path) -> TlsFiles {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let server_key = KeyPair::generate().unwrap();
    let server_params =
        CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
    let server_cert = server_params.signed_by(&server_key, &issuer).unwrap();
    let files = TlsFiles {
        cert: dir.join("server.pem"),
        key: dir.join("server.key"),
        ca: dir.join("ca.pem"),
    };
    std::fs::write(&files.cert, server_cert.pem()).unwrap();
    std::fs::write(&files.key, server_key.serialize_pem()).unwrap();
    std::fs::write(&files.ca, ca_cert.pem()).unwrap();
    files
}

#[tokio::test]
async fn rediss_with_a_ca_file_runs_producer_and_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let files = make_certificates(dir.path());
    let ca = files.ca.clone();
    let server = RedisServer::builder().tls(files).start();
    let url = server.url();
    assert!(url.starts_with("rediss://"));

    // Without the CA, the server's certificate is not trusted: a clear failure at connect.
    std::env::remove_var("DELAYQ_REDIS_CA_FILE");
    let err = Producer::connect(&url).await.unwrap_err();
    assert!(matches!(err, Error::Tls { .. }), "{err}");
    assert!(err.to_string().contains("DELAYQ_REDIS_CA_FILE"), "{err}");
    println!("without the CA: {err}");

    // A plain redis:// client cannot talk to the TLS port either.
    let plain = url.replacen("rediss://", "redis://", 1);
    assert!(Producer::connect(&plain).await.is_err());

    std::env::set_var("DELAYQ_REDIS_CA_FILE", &ca);
    let p = Producer::connect(&url).await.expect("TLS producer");
    let rt = Runtime::builder()
        .redis_url(&url)
        .topics(["tls.jobs"])
        .spawn()
        .await
        .expect("TLS runtime");
    p.send("tls.jobs", &1u32, Duration::from_millis(100))
        .await
        .unwrap();
    p.send_batch("tls.jobs", [(2u32, Duration::ZERO), (3, Duration::ZERO)])
        .await
        .unwrap();
    let mut seen = TLS_SEEN.wait_for(3, Duration::from_secs(20)).await;
    seen.sort();
    assert_eq!(seen, [1, 2, 3]);
    drained(&p, "tls.jobs", Duration::from_secs(10)).await;
    rt.shutdown().await.unwrap();

    std::env::set_var("DELAYQ_REDIS_CA_FILE", dir.path().join("missing.pem"));
    let err = Producer::connect(&url).await.unwrap_err();
    assert!(err.to_string().contains("DELAYQ_REDIS_CA_FILE"), "{err}");
}
