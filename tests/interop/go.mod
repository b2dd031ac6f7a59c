module otel-route-shadow/interop

go 1.26.0

require (
	filippo.io/torchwood v0.9.0
	golang.org/x/mod v0.43.0
)

require (
	golang.org/x/crypto v0.46.0 // indirect
	golang.org/x/sync v0.19.0 // indirect
)
