package models

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"strings"

	"github.com/google/uuid"
)

// KeyPrefix starts every credential of the service.
const KeyPrefix = "sk-studio-"

const keyAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// NewID returns a new random UUID string.
func NewID() string { return uuid.NewString() }

// RandomString returns n characters drawn uniformly from alphabet with crypto/rand.
func RandomString(n int, alphabet string) string {
	var b strings.Builder
	max := big.NewInt(int64(len(alphabet)))
	for i := 0; i < n; i++ {
		v, err := rand.Int(rand.Reader, max)
		if err != nil {
			panic(fmt.Sprintf("crypto/rand: %v", err))
		}
		b.WriteByte(alphabet[v.Int64()])
	}
	return b.String()
}

// NewAPIKey returns a fresh key: the prefix and 24 random letters or digits.
func NewAPIKey() string { return KeyPrefix + RandomString(24, keyAlphabet) }

// ValidKeyFormat reports whether s has the shape of a service key.
func ValidKeyFormat(s string) bool {
	if len(s) != len(KeyPrefix)+24 || !strings.HasPrefix(s, KeyPrefix) {
		return false
	}
	for _, c := range s[len(KeyPrefix):] {
		if !strings.ContainsRune(keyAlphabet, c) {
			return false
		}
	}
	return true
}

// HashKey returns the hex SHA-256 of a key: the only form in which keys are stored.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// EqualHash compares two hashes in constant time.
func EqualHash(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// Sealer encrypts small secrets (member keys shown again in listings) with a key derived from the service secret.
type Sealer struct{ aead cipher.AEAD }

// NewSealer derives an AES-256-GCM key from the service secret.
func NewSealer(secret []byte) *Sealer {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("studio/seal/v1"))
	block, err := aes.NewCipher(mac.Sum(nil))
	if err != nil {
		panic(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return &Sealer{aead: aead}
}

// Seal encrypts plaintext into a base64 string.
func (s *Sealer) Seal(plaintext string) string {
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		panic(err)
	}
	return base64.RawStdEncoding.EncodeToString(s.aead.Seal(nonce, nonce, []byte(plaintext), nil))
}

// Open decrypts a string made by Seal.
func (s *Sealer) Open(sealed string) (string, error) {
	raw, err := base64.RawStdEncoding.DecodeString(sealed)
	if err != nil || len(raw) < s.aead.NonceSize() {
		return "", errors.New("seal: malformed")
	}
	pt, err := s.aead.Open(nil, raw[:s.aead.NonceSize()], raw[s.aead.NonceSize():], nil)
	if err != nil {
		return "", errors.New("seal: cannot open")
	}
	return string(pt), nil
}

// Sign returns the HMAC-SHA256 of msg under a purpose-specific key derived from the secret.
func Sign(secret []byte, purpose string, msg []byte) []byte {
	k := hmac.New(sha256.New, secret)
	k.Write([]byte("studio/" + purpose))
	mac := hmac.New(sha256.New, k.Sum(nil))
	mac.Write(msg)
	return mac.Sum(nil)
}
