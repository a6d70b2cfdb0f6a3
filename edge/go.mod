module spookat/edge

go 1.26.8

require (
	spookat/schema v0.0.0
	spookat/worker v0.0.0
)

replace (
	spookat/schema => ../schema
	spookat/worker => ../worker
)
