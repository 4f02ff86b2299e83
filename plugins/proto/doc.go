// Package policyv1 holds the gRPC protocol (wqhost.policy.v1) between wqhost and external
// policy plugins, generated from policy.proto, and the conversions between its messages and
// the listener's policy types.
package policyv1

//go:generate protoc --proto_path=. --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative policy.proto
