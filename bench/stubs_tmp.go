package main

import "context"

func runLocal(ctx context.Context, b *bench) error { return skipf("todo") }
func runIncus(ctx context.Context, b *bench) error { return skipf("todo") }
