package redisstore

import "github.com/redis/go-redis/v9"

// Script is one script the store sends: its name, the text the servers
// run and the script the store sends it by.
type Script struct {
	Name, File, Text string
	Script           *redis.Script
}

// Scripts returns every script the store sends, with the file each is
// made of and the library lib.lua ("" for the scripts without it).
func Scripts() (lib string, scripts []Script) {
	return libSource, []Script{
		{"script", scriptFile, scriptSource, script},
		{"legacy", scriptFile, legacyScriptSource(), legacyScript},
		{"common", commonFile, commonSource, commonScript},
		{"peek", peekFile, peekSource, peekScript},
		{"legacyPeek", peekFile, withoutFirstLine(peekSource), legacyPeekScript},
		{"repair", repairSource, repairSource, repairScript},
		{"reset", resetSource, resetSource, resetScript},
	}
}
