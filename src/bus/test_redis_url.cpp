// The --bus URL: users, passwords (percent-encoded, or from a file), Sentinel
// lists, databases; and the password never in a message.
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "bus/redis_url.hpp"

using m0::bus::parse_redis_url;
using m0::bus::read_redis_password;
using m0::bus::RedisAddress;

TEST_CASE("redis url: USER:PASSWORD@ is percent-decoded, and the text shows *** for the password",
          "[redis][url]") {
    std::string err;
    auto u = parse_redis_url("redis://app:p%40ss%3Aw%2Frd%25@10.0.0.5:6380/3", err);
    REQUIRE(u);
    CHECK(u->user == "app");
    CHECK(u->password == "p@ss:w/rd%");
    CHECK(u->password_in_url);
    CHECK((u->host == "10.0.0.5" && u->port == 6380 && u->db == 3));
    CHECK(u->text == "redis://app:***@10.0.0.5:6380/3");
    // No user: the default user (requirepass).
    u = parse_redis_url("redis://:secret@h", err);
    REQUIRE(u);
    CHECK((u->user.empty() && u->password == "secret" && u->host == "h" && u->port == 6379));
    CHECK(u->text == "redis://:***@h");
    // A user alone: its password from --bus-password-file.
    u = parse_redis_url("redis://m%30@h/1", err);
    REQUIRE(u);
    CHECK((u->user == "m0" && u->password.empty() && !u->password_in_url && u->db == 1));
    CHECK(u->text == "redis://m%30@h/1");
    // An '@' in the password unencoded: the last '@' ends the credentials.
    u = parse_redis_url("redis://:a@b@h:7000", err);
    REQUIRE(u);
    CHECK((u->password == "a@b" && u->host == "h" && u->port == 7000));
    u = parse_redis_url("redis+unix://m0:pw@/run/redis.sock?db=2", err);
    REQUIRE(u);
    CHECK((u->unix_path == "/run/redis.sock" && u->db == 2 && u->user == "m0" &&
           u->password == "pw"));
    CHECK(u->text == "redis+unix://m0:***@/run/redis.sock?db=2");
    u = parse_redis_url("redis+unix:///run/redis.sock", err);
    REQUIRE(u);
    CHECK((u->unix_path == "/run/redis.sock" && u->password.empty()));
}

TEST_CASE(
    "redis url: redis+sentinel:// lists the sentinels (port 26379 by default), the master, "
    "the database",
    "[redis][url]") {
    std::string err;
    auto u = parse_redis_url(
        "redis+sentinel://m0:s%3Dcret@10.0.0.1:26380,10.0.0.2,[::1]:5000/mymaster/4", err);
    REQUIRE(u);
    CHECK(u->sentinel());
    CHECK(u->sentinels ==
          std::vector<RedisAddress>{{"10.0.0.1", 26380}, {"10.0.0.2", 26379}, {"::1", 5000}});
    CHECK((u->master == "mymaster" && u->db == 4 && u->user == "m0" && u->password == "s=cret"));
    CHECK(u->text == "redis+sentinel://m0:***@10.0.0.1:26380,10.0.0.2,[::1]:5000/mymaster/4");
    u = parse_redis_url("redis+sentinel://h:1/m", err);
    REQUIRE(u);
    CHECK((u->sentinels.size() == 1 && u->master == "m" && u->db == 0 && u->password.empty()));
    CHECK_FALSE(parse_redis_url("redis://h:1/m", err).has_value());  // not a sentinel URL
}

TEST_CASE("redis url: a bad URL is one line naming the flag, never the password", "[redis][url]") {
    for (const char* bad : {"",
                            "http://x",
                            "redis://",
                            "redis://:6379",
                            "redis://h:0",
                            "redis://h:99999",
                            "redis://h:12ab",
                            "redis://h/x",
                            "redis+unix://relative",
                            "redis+unix:///s?x=1",
                            "redis://[::1",
                            "redis://:@h",
                            "redis://:pa%zzss@h",
                            "redis://u%4:pw@h",
                            "redis+sentinel://h:1",
                            "redis+sentinel://h:1/",
                            "redis+sentinel://h:1,,h:2/m",
                            "redis+sentinel://h:0/m",
                            "redis+sentinel://h:1/m/x",
                            "redis+sentinel://:pw@/m",
                            "redis+unix://u:pw@relative"}) {
        INFO(bad);
        std::string err;
        CHECK_FALSE(parse_redis_url(bad, err));
        CHECK(err.starts_with("--bus "));
        CHECK(err.find('\n') == std::string::npos);
        CHECK(err.find("pw") == std::string::npos);
        CHECK(err.find("pa%zzss") == std::string::npos);
    }
}

TEST_CASE("redis url: the password file's first line is the password; not beside one in the URL",
          "[redis][url]") {
    const std::string path =
        (std::filesystem::temp_directory_path() / "m0-test-redis-password").string();
    auto write = [&](const std::string& text) { std::ofstream(path, std::ios::trunc) << text; };
    std::string err;
    auto u = parse_redis_url("redis://m0@127.0.0.1/0", err);
    REQUIRE(u);
    write("s3cret:with spaces\r\nsecond line ignored\n");
    REQUIRE(read_redis_password(*u, path, err));
    CHECK(u->password == "s3cret:with spaces");
    CHECK(u->text == "redis://m0@127.0.0.1/0");  // the file's password is in no message
    write("\nnext");
    CHECK_FALSE(read_redis_password(*u, path, err));
    CHECK(err.find("empty") != std::string::npos);
    std::filesystem::remove(path);
    CHECK_FALSE(read_redis_password(*u, path, err));
    CHECK(err.find("cannot read") != std::string::npos);
    auto given = parse_redis_url("redis://:inurl@h", err);
    REQUIRE(given);
    write("other\n");
    CHECK_FALSE(read_redis_password(*given, path, err));
    CHECK(err.find("give it once") != std::string::npos);
    CHECK(err.find("inurl") == std::string::npos);
    std::filesystem::remove(path);
}
