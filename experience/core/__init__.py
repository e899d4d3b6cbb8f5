"""What every subject of experience memory shares: the statuses, the scope, the reviewed-item base and the pure rules over them."""
