module github.com/wqhost/wqhost/deploy

go 1.26.8

replace github.com/wqhost/wqhost => ../

replace github.com/wqhost/wqhost/sdk/go => ../sdk/go

require (
	github.com/google/go-containerregistry v0.22.1
	golang.org/x/crypto/x509roots/fallback v0.0.0-20261030153154-30a33513ff6d
)

require (
	github.com/docker/docker-credential-helpers v0.9.5 // indirect
	github.com/klauspost/compress v1.20.1 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	github.com/sirupsen/logrus v1.10.2 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
