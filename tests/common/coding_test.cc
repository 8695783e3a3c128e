#include "common/coding.h"

#include <string>

#include "common/checksum.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

TEST(CodingTest, FixedWidthRoundTripIsLittleEndian) {
  std::string s;
  PutFixed16(&s, 0x0102);
  PutFixed32(&s, 0x03040506u);
  PutFixed64(&s, 0x0708090a0b0c0d0eull);
  ASSERT_EQ(s.size(), 14u);
  EXPECT_EQ(static_cast<unsigned char>(s[0]), 0x02);
  EXPECT_EQ(static_cast<unsigned char>(s[2]), 0x06);
  EXPECT_EQ(static_cast<unsigned char>(s[6]), 0x0e);
  EXPECT_EQ(DecodeFixed16(s.data()), 0x0102);
  EXPECT_EQ(DecodeFixed32(s.data() + 2), 0x03040506u);
  EXPECT_EQ(DecodeFixed64(s.data() + 6), 0x0708090a0b0c0d0eull);
}

TEST(CodingTest, BigEndian32MatchesIdxHeaderOrder) {
  const char idx_magic[4] = {0, 0, 8, 3};
  EXPECT_EQ(DecodeBigEndian32(idx_magic), 0x803u);
  char buf[4];
  EncodeBigEndian32(buf, 60000);
  EXPECT_EQ(DecodeBigEndian32(buf), 60000u);
}

TEST(ChecksumTest, StreamingEqualsOneShot) {
  std::string data(10000, 'x');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 31);
  Xxh3Stream stream;
  stream.Update(absl::string_view(data).substr(0, 1234));
  stream.Update(absl::string_view(data).substr(1234));
  EXPECT_EQ(stream.Digest(), Xxh3(data));
  EXPECT_NE(Xxh3(data), Xxh3(data.substr(1)));
  EXPECT_EQ(ChecksumToHex(0xabcull), "0000000000000abc");
}

}  // namespace
}  // namespace sluice
