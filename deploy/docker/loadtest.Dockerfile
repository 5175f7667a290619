# syntax=docker/dockerfile:1
# The `loadtest` binary in a distroless image (non-root, uid 65532).
# Build from the repository root: docker build -f deploy/docker/loadtest.Dockerfile -t warmpath/loadtest .
FROM rust:1.95-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends cmake && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p loadtest --bin loadtest && cp target/release/loadtest /loadtest

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /loadtest /usr/local/bin/loadtest
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/loadtest"]
