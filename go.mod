module github.com/antrea-proxy/antrea-proxy

go 1.26
