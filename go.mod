module github.com/dragonc/dragonc

go 1.26.8

require (
	github.com/alecthomas/participle/v2 v2.1.4 // indirect
	github.com/alecthomas/repr v0.5.4 // indirect
	github.com/emicklei/dot v1.6.2 // indirect
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/gopacket/gopacket v1.7.7 // indirect
	gonum.org/v1/gonum v0.17.0 // indirect
)
