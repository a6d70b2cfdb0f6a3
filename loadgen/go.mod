module spookat/loadgen

go 1.26.8

require spookat/schema v0.0.0

replace spookat/schema => ../schema
