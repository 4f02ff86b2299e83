package config_test

import (
	"fmt"

	"github.com/wqhost/wqhost/host/config"
)

// Parse decodes and validates a config from YAML bytes (Load adds the file, environment and
// flags); every setting left out takes its documented default.
func ExampleParse() {
	yaml := []byte(`
tenants:
  acme:
    bindings:
      orders:
        queue: orders
        output: invoices
        module: builtin:billing-go
        max_workers: 4
`)
	c, err := config.Parse(yaml, ".")
	if err != nil {
		fmt.Println(err)
		return
	}
	b, err := c.Binding("acme", "orders")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("queue:", c.PhysicalQueue("acme", b.Backend, b.Queue))
	fmt.Println("backend:", b.Backend)
	fmt.Println("workers:", b.MinWorkers, "to", b.MaxWorkers)
	fmt.Println("batch size:", b.BatchSize)
	fmt.Println("visibility timeout:", b.VisibilityTimeout)

	// A bad value is refused with the key that holds it.
	_, err = config.Parse([]byte("tenants: {acme: {bindings: {orders: {queue: orders, module: 'builtin:echo-go', batch_size: 100}}}}"), ".")
	fmt.Println(err)
	// Output:
	// queue: acme.orders
	// backend: local
	// workers: 1 to 4
	// batch size: 32
	// visibility timeout: 30s
	// invalid config: tenants.acme.bindings.orders.batch_size: 100 is above the maximum 32
}
