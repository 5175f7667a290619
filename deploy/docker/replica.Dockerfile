# syntax=docker/dockerfile:1
# The `replica` binary in a distroless image (non-root, uid 65532).
# Build from the repository root: docker build -f deploy/docker/replica.Dockerfile -t warmpath/replica .
FROM rust:1.95-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends cmake && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p replica --bin replica && cp target/release/replica /replica

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /replica /usr/local/bin/replica
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/replica"]
