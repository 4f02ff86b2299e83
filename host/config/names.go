package config

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Queue and tenant names, and how a (tenant, queue) pair becomes one name on a backend.
//
// The mapping is injective by construction, so no tenant can name another tenant's queue:
//
//   - A tenant-local queue name starts with a letter and holds lower-case letters, digits and
//     single inner hyphens (Azure's alphabet, kept on every backend so a binding moves between
//     backends unchanged). Names ending in "-poison" are reserved for dead letters.
//   - On local and memory backends a named tenant's queue is "<tenant>.<queue>"; the default
//     tenant's is the bare name. No queue name holds a dot and no tenant name does, so the
//     first dot (or its absence) splits every physical name back into its pair.
//   - Azure allows no dot, so there a named tenant's queue is "<n>-<tenant>-<queue>" with n
//     the tenant name's length in decimal: "4-acme-orders". A default-tenant name starts with
//     a letter, these start with a digit; n says where the tenant ends, so the pair is read
//     back whatever hyphens the tenant and queue names hold. Azure's own rule (3-63
//     characters, single hyphens) is checked on the result.
//
// The mapping can be inverted (decodePhysicalQueue in names_test.go), which is what makes it
// injective (fuzz_test.go).

var (
	queueNameRE  = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)
	azureTenRE   = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	azurePhysRE  = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	errQueueName = errors.New("must be 1-63 lower-case letters, digits or single inner '-', starting with a letter")
)

// MaxQueueName is the longest tenant-local queue name (and Azure's longest queue name).
const MaxQueueName = 63

// ErrReservedQueue reports a queue name ending in "-poison": those belong to the host's
// dead letters, so no binding, guest or send may name one.
var ErrReservedQueue = errors.New("names ending in " + PoisonSuffix + " are reserved for dead letters")

// ValidQueueName reports whether q is a queue name as a tenant writes it (see
// CheckQueueName): the "-poison" names the host derives are valid too.
func ValidQueueName(q string) bool { return len(q) <= MaxQueueName && queueNameRE.MatchString(q) }

// CheckQueueName returns why q cannot name a tenant's own queue, or nil: the shape of
// ValidQueueName, and not a reserved "-poison" name.
func CheckQueueName(q string) error {
	if !ValidQueueName(q) {
		return fmt.Errorf("queue name %q %w", q, errQueueName)
	}
	if strings.HasSuffix(q, PoisonSuffix) {
		return fmt.Errorf("queue name %q: %w", q, ErrReservedQueue)
	}
	return nil
}

// checkTenantName returns why tenant cannot be a tenant on a backend of type typ, or nil.
// Every backend takes lower-case letters, digits, '-' and '_' up to 63; Azure takes no '_'
// and no leading, trailing or doubled '-'.
func checkTenantName(typ, tenant string) error {
	if !nameRE.MatchString(tenant) {
		return fmt.Errorf("tenant name %q must be lower-case letters, digits, '-' or '_' (at most 63)", tenant)
	}
	if typ == BackendAzure && tenant != DefaultTenant && !azureTenRE.MatchString(tenant) {
		return fmt.Errorf("tenant name %q cannot own Azure queues: Azure takes lower-case letters, digits and single inner '-' only (no '_')", tenant)
	}
	return nil
}

// physicalQueue is PhysicalQueue for a backend type.
func physicalQueue(typ, tenant, queue string) string {
	if tenant == DefaultTenant || tenant == "" {
		return queue
	}
	if typ == BackendAzure {
		return strconv.Itoa(len(tenant)) + "-" + tenant + "-" + queue
	}
	return tenant + "." + queue
}

// checkPhysical returns why name cannot be a queue on a backend of type typ, or nil.
func checkPhysical(typ, name string) error {
	if typ != BackendAzure {
		return nil
	}
	switch {
	case len(name) < 3 || len(name) > 63:
		return fmt.Errorf("the Azure queue name %q is %d characters, outside Azure's 3..63", name, len(name))
	case !azurePhysRE.MatchString(name):
		return fmt.Errorf("the Azure queue name %q is not lower-case letters, digits and single inner '-'", name)
	}
	return nil
}
