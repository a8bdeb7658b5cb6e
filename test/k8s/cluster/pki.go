package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the cluster's certificate authority and the files made from it.
type pki struct {
	dir    string
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caPEM  []byte
	serial int64
}

func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "wsl-gpu-hook test cluster CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(7 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	ca, _ := x509.ParseCertificate(der)
	p := &pki{dir: dir, ca: ca, caKey: key, caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), serial: 1}
	return p, os.WriteFile(p.path("ca.crt"), p.caPEM, 0o644)
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

// issue signs a certificate for cn in groups (client) and, with ips or
// dns, for serving; it returns the PEM certificate and key.
func (p *pki) issue(cn string, groups []string, ips []net.IP, dns []string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	p.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial), Subject: pkix.Name{CommonName: cn, Organization: groups},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		IPAddresses: ips, DNSNames: dns,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
}

// files issues a certificate and writes NAME.crt and NAME.key.
func (p *pki) files(name, cn string, groups []string, ips []net.IP, dns []string) (crt, key string, err error) {
	c, k, err := p.issue(cn, groups, ips, dns)
	if err != nil {
		return "", "", err
	}
	crt, key = p.path(name+".crt"), p.path(name+".key")
	if err := os.WriteFile(crt, c, 0o644); err != nil {
		return "", "", err
	}
	return crt, key, os.WriteFile(key, k, 0o600)
}

// kubeconfig writes a kubeconfig for user cn (in groups) talking to server.
func (p *pki) kubeconfig(name, server, cn string, groups ...string) (string, error) {
	c, k, err := p.issue(cn, groups, nil, nil)
	if err != nil {
		return "", err
	}
	b64 := func(b []byte) string { return encodeBase64(b) }
	cfg := "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: " + server +
		"\n    certificate-authority-data: " + b64(p.caPEM) +
		"\nusers:\n- name: " + cn + "\n  user:\n    client-certificate-data: " + b64(c) + "\n    client-key-data: " + b64(k) +
		"\ncontexts:\n- name: test\n  context:\n    cluster: test\n    user: " + cn + "\ncurrent-context: test\n"
	path := p.path(name + ".kubeconfig")
	return path, os.WriteFile(path, []byte(cfg), 0o600)
}

// serviceAccountKey writes the RSA key service account tokens are signed with.
func (p *pki) serviceAccountKey() (string, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", err
	}
	path := p.path("sa.key")
	return path, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600)
}
