#!/usr/bin/env bash
# Make a throwaway CA and a server certificate for www.clarke.test with the openssl CLI.
# Usage: mkcerts.sh DIR   -> DIR/ca.pem DIR/cert.pem DIR/key.pem
set -euo pipefail
dir=${1:?usage: mkcerts.sh DIR}
mkdir -p "$dir"
cd "$dir"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
  -keyout ca.key -out ca.pem -subj "/CN=Clarke test CA" \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
  -keyout key.pem -out server.csr -subj "/CN=www.clarke.test" 2>/dev/null
printf 'subjectAltName=DNS:www.clarke.test,DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' > ext.cnf
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
  -extfile ext.cnf -out cert.pem 2>/dev/null
rm -f server.csr ext.cnf ca.srl
