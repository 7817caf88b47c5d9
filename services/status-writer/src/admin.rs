//! The admin HTTP server of status-writer: `/metrics` (the process metrics of the global
//! recorder followed by the removable contract gauges of [`Gauges`]), `/healthz`, `/readyz`.
//! pacto-runtime's admin server renders only the global recorder, which cannot forget the series
//! of a deleted Pacto; hence this small variant.

use std::convert::Infallible;

use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper_util::rt::TokioIo;
use metrics_exporter_prometheus::PrometheusHandle;
use pacto_runtime::CancellationToken;
use pacto_runtime::admin::{AdminError, Readiness};
use tokio::net::TcpListener;

use crate::gauges::Gauges;

/// Serves until `shutdown`; clears readiness when it stops.
pub async fn serve(
    listener: TcpListener,
    metrics: PrometheusHandle,
    gauges: Gauges,
    readiness: Readiness,
    shutdown: CancellationToken,
) -> Result<(), AdminError> {
    let result = loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) if error.kind() == std::io::ErrorKind::ConnectionAborted => continue,
                Err(error) => break Err(AdminError::Accept(error)),
            },
            () = shutdown.cancelled() => break Ok(()),
        };
        let metrics = metrics.clone();
        let gauges = gauges.clone();
        let readiness = readiness.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let response = route(&request, &metrics, &gauges, &readiness);
                async move { Ok::<_, Infallible>(response) }
            });
            if let Err(error) = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(%error, "admin connection ended with an error");
            }
        });
    };
    readiness.set(false);
    result
}

fn route(
    request: &Request<Incoming>,
    metrics: &PrometheusHandle,
    gauges: &Gauges,
    readiness: &Readiness,
) -> Response<Full<Bytes>> {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return text(
            StatusCode::METHOD_NOT_ALLOWED,
            "method not allowed\n".to_owned(),
        );
    }
    match request.uri().path() {
        "/metrics" => {
            metrics.run_upkeep();
            let mut body = metrics.render();
            body.push_str(&gauges.render());
            let mut response = text(StatusCode::OK, body);
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            );
            response
        }
        "/healthz" => text(StatusCode::OK, "ok\n".to_owned()),
        "/readyz" if readiness.is_ready() => text(StatusCode::OK, "ready\n".to_owned()),
        "/readyz" => text(StatusCode::SERVICE_UNAVAILABLE, "not ready\n".to_owned()),
        _ => text(StatusCode::NOT_FOUND, "not found\n".to_owned()),
    }
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
