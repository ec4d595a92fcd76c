package hosted

import "sync"

// Lazy is a value built on first use. A package-level Lazy holds only a
// function: it is laid out by the linker, so the package that declares
// it initializes nothing at start-up (sync.OnceValue would allocate
// then).
type Lazy[T any] struct {
	once  sync.Once
	Build func() T
	v     T
}

// Get builds the value the first time and returns it.
func (l *Lazy[T]) Get() T {
	l.once.Do(func() { l.v = l.Build() })
	return l.v
}
