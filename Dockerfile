# syntax=docker/dockerfile:1
# Build: docker build -t studio .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
COPY rest/client/go.mod rest/client/go.sum ./rest/client/
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/studio ./cmd/studio

# Static binary on distroless, as the non-root user (uid 65532).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/studio /usr/local/bin/studio
ENV SERVICE_ADDR=0.0.0.0:8080 SERVICE_DATA_DIR=/data
VOLUME ["/data"]
EXPOSE 8080
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/studio"]
CMD ["serve"]
