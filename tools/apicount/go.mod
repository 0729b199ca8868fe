module github.com/slidelog/slidelog/tools/apicount

go 1.26.0
