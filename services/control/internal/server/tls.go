package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// LoadTLS builds the listener's TLS configuration from PEM files: nil (plaintext) when no
// certificate is configured; TLS with certFile and keyFile; and mutual TLS when clientCAFile is
// also set, where every client must present a certificate signed by one of those CAs (the
// handshake fails otherwise, before any call). Half a configuration is refused, so a typo cannot
// silently serve plaintext or accept clients without a certificate.
func LoadTLS(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	switch {
	case certFile == "" && keyFile == "" && clientCAFile == "":
		return nil, nil
	case certFile == "" || keyFile == "":
		return nil, errors.New("set both MSGX_CONTROL_TLS_CERT and MSGX_CONTROL_TLS_KEY (MSGX_CONTROL_CLIENT_CA needs them too)")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("server certificate (MSGX_CONTROL_TLS_CERT, MSGX_CONTROL_TLS_KEY): %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if clientCAFile != "" {
		pem, err := os.ReadFile(clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("client CA (MSGX_CONTROL_CLIENT_CA): %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("client CA (MSGX_CONTROL_CLIENT_CA) %s holds no PEM certificate", clientCAFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}
