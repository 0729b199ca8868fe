package slidelog_test

import (
	"errors"
	"testing"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/redisstore"
)

func TestNewRejectsNilStores(t *testing.T) {
	for _, s := range []slidelog.Store{nil, (*memstore.Store)(nil), (*redisstore.Store)(nil)} {
		if _, err := slidelog.New(s, slidelog.PerSecond(1)); !errors.Is(err, slidelog.ErrNilStore) {
			t.Errorf("New(%#v): got %v, want ErrNilStore", s, err)
		}
	}
}
