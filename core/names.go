package slidelog

import (
	"fmt"
	"reflect"
	"sync"
)

// A limiter's name keys its logs (Request.Namespace), so two open
// limiters with one name on one store would share every key's budget
// without saying so. names holds the (store, name) pairs of the open
// limiters of this process; New claims one and Close releases it.
var names = struct {
	sync.Mutex
	taken map[nameClaim]bool
}{taken: map[nameClaim]bool{}}

type nameClaim struct {
	store Store
	name  string
}

// claimName reserves name on store for a new limiter, failing with
// ErrNameTaken when an open limiter of this process has it. A store that
// is not a pointer cannot be told apart from a copy of it and is not
// checked. The returned function releases the name.
func claimName(store Store, name string) (release func(), err error) {
	if reflect.ValueOf(store).Kind() != reflect.Pointer {
		return func() {}, nil
	}
	c := nameClaim{store, name}
	names.Lock()
	defer names.Unlock()
	if names.taken[c] {
		return nil, fmt.Errorf("%w: a limiter named %q is open on this store; give each limiter its own name (WithName), or share one limiter", ErrNameTaken, name)
	}
	names.taken[c] = true
	return func() {
		names.Lock()
		delete(names.taken, c)
		names.Unlock()
	}, nil
}
