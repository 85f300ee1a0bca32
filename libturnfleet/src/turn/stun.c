/* stun: STUN/TURN messages (RFC 8489, RFC 8656), sans I/O. The decoder takes
 * untrusted bytes: every read is bounds-checked against the copied message. */
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define TF_STUN__COOKIE 0x2112A442u
#define TF_STUN__FP_XOR 0x5354554Eu
#define TF_STUN__HEADER 20
#define TF_STUN__MI_SIZE 20
#define TF_STUN__ATTR_MI_SHA256 0x001C
/* RFC 8489: REALM, NONCE, SOFTWARE and reason phrases are decoded up to 763 bytes. */
#define TF_STUN__MAX_TEXT 763

/* zlib CRC-32 (ISO-HDLC, reflected polynomial 0xEDB88320), four bytes a step
 * ("slicing by 4"): table k maps a byte to its CRC shifted through k more zero
 * bytes. Every message sent and received is fingerprinted: the probe's hot path.
 * Where the CPU multiplies carry-less (x86-64 PCLMULQDQ), no table is used. */
static const uint32_t tf_stun__crc_table[4][256] = {
  {
    0x00000000u, 0x77073096u, 0xee0e612cu, 0x990951bau, 0x076dc419u, 0x706af48fu, 0xe963a535u, 0x9e6495a3u, 0x0edb8832u,
    0x79dcb8a4u, 0xe0d5e91eu, 0x97d2d988u, 0x09b64c2bu, 0x7eb17cbdu, 0xe7b82d07u, 0x90bf1d91u, 0x1db71064u, 0x6ab020f2u,
    0xf3b97148u, 0x84be41deu, 0x1adad47du, 0x6ddde4ebu, 0xf4d4b551u, 0x83d385c7u, 0x136c9856u, 0x646ba8c0u, 0xfd62f97au,
    0x8a65c9ecu, 0x14015c4fu, 0x63066cd9u, 0xfa0f3d63u, 0x8d080df5u, 0x3b6e20c8u, 0x4c69105eu, 0xd56041e4u, 0xa2677172u,
    0x3c03e4d1u, 0x4b04d447u, 0xd20d85fdu, 0xa50ab56bu, 0x35b5a8fau, 0x42b2986cu, 0xdbbbc9d6u, 0xacbcf940u, 0x32d86ce3u,
    0x45df5c75u, 0xdcd60dcfu, 0xabd13d59u, 0x26d930acu, 0x51de003au, 0xc8d75180u, 0xbfd06116u, 0x21b4f4b5u, 0x56b3c423u,
    0xcfba9599u, 0xb8bda50fu, 0x2802b89eu, 0x5f058808u, 0xc60cd9b2u, 0xb10be924u, 0x2f6f7c87u, 0x58684c11u, 0xc1611dabu,
    0xb6662d3du, 0x76dc4190u, 0x01db7106u, 0x98d220bcu, 0xefd5102au, 0x71b18589u, 0x06b6b51fu, 0x9fbfe4a5u, 0xe8b8d433u,
    0x7807c9a2u, 0x0f00f934u, 0x9609a88eu, 0xe10e9818u, 0x7f6a0dbbu, 0x086d3d2du, 0x91646c97u, 0xe6635c01u, 0x6b6b51f4u,
    0x1c6c6162u, 0x856530d8u, 0xf262004eu, 0x6c0695edu, 0x1b01a57bu, 0x8208f4c1u, 0xf50fc457u, 0x65b0d9c6u, 0x12b7e950u,
    0x8bbeb8eau, 0xfcb9887cu, 0x62dd1ddfu, 0x15da2d49u, 0x8cd37cf3u, 0xfbd44c65u, 0x4db26158u, 0x3ab551ceu, 0xa3bc0074u,
    0xd4bb30e2u, 0x4adfa541u, 0x3dd895d7u, 0xa4d1c46du, 0xd3d6f4fbu, 0x4369e96au, 0x346ed9fcu, 0xad678846u, 0xda60b8d0u,
    0x44042d73u, 0x33031de5u, 0xaa0a4c5fu, 0xdd0d7cc9u, 0x5005713cu, 0x270241aau, 0xbe0b1010u, 0xc90c2086u, 0x5768b525u,
    0x206f85b3u, 0xb966d409u, 0xce61e49fu, 0x5edef90eu, 0x29d9c998u, 0xb0d09822u, 0xc7d7a8b4u, 0x59b33d17u, 0x2eb40d81u,
    0xb7bd5c3bu, 0xc0ba6cadu, 0xedb88320u, 0x9abfb3b6u, 0x03b6e20cu, 0x74b1d29au, 0xead54739u, 0x9dd277afu, 0x04db2615u,
    0x73dc1683u, 0xe3630b12u, 0x94643b84u, 0x0d6d6a3eu, 0x7a6a5aa8u, 0xe40ecf0bu, 0x9309ff9du, 0x0a00ae27u, 0x7d079eb1u,
    0xf00f9344u, 0x8708a3d2u, 0x1e01f268u, 0x6906c2feu, 0xf762575du, 0x806567cbu, 0x196c3671u, 0x6e6b06e7u, 0xfed41b76u,
    0x89d32be0u, 0x10da7a5au, 0x67dd4accu, 0xf9b9df6fu, 0x8ebeeff9u, 0x17b7be43u, 0x60b08ed5u, 0xd6d6a3e8u, 0xa1d1937eu,
    0x38d8c2c4u, 0x4fdff252u, 0xd1bb67f1u, 0xa6bc5767u, 0x3fb506ddu, 0x48b2364bu, 0xd80d2bdau, 0xaf0a1b4cu, 0x36034af6u,
    0x41047a60u, 0xdf60efc3u, 0xa867df55u, 0x316e8eefu, 0x4669be79u, 0xcb61b38cu, 0xbc66831au, 0x256fd2a0u, 0x5268e236u,
    0xcc0c7795u, 0xbb0b4703u, 0x220216b9u, 0x5505262fu, 0xc5ba3bbeu, 0xb2bd0b28u, 0x2bb45a92u, 0x5cb36a04u, 0xc2d7ffa7u,
    0xb5d0cf31u, 0x2cd99e8bu, 0x5bdeae1du, 0x9b64c2b0u, 0xec63f226u, 0x756aa39cu, 0x026d930au, 0x9c0906a9u, 0xeb0e363fu,
    0x72076785u, 0x05005713u, 0x95bf4a82u, 0xe2b87a14u, 0x7bb12baeu, 0x0cb61b38u, 0x92d28e9bu, 0xe5d5be0du, 0x7cdcefb7u,
    0x0bdbdf21u, 0x86d3d2d4u, 0xf1d4e242u, 0x68ddb3f8u, 0x1fda836eu, 0x81be16cdu, 0xf6b9265bu, 0x6fb077e1u, 0x18b74777u,
    0x88085ae6u, 0xff0f6a70u, 0x66063bcau, 0x11010b5cu, 0x8f659effu, 0xf862ae69u, 0x616bffd3u, 0x166ccf45u, 0xa00ae278u,
    0xd70dd2eeu, 0x4e048354u, 0x3903b3c2u, 0xa7672661u, 0xd06016f7u, 0x4969474du, 0x3e6e77dbu, 0xaed16a4au, 0xd9d65adcu,
    0x40df0b66u, 0x37d83bf0u, 0xa9bcae53u, 0xdebb9ec5u, 0x47b2cf7fu, 0x30b5ffe9u, 0xbdbdf21cu, 0xcabac28au, 0x53b39330u,
    0x24b4a3a6u, 0xbad03605u, 0xcdd70693u, 0x54de5729u, 0x23d967bfu, 0xb3667a2eu, 0xc4614ab8u, 0x5d681b02u, 0x2a6f2b94u,
    0xb40bbe37u, 0xc30c8ea1u, 0x5a05df1bu, 0x2d02ef8du,
  },
  {
    0x00000000u, 0x191b3141u, 0x32366282u, 0x2b2d53c3u, 0x646cc504u, 0x7d77f445u, 0x565aa786u, 0x4f4196c7u, 0xc8d98a08u,
    0xd1c2bb49u, 0xfaefe88au, 0xe3f4d9cbu, 0xacb54f0cu, 0xb5ae7e4du, 0x9e832d8eu, 0x87981ccfu, 0x4ac21251u, 0x53d92310u,
    0x78f470d3u, 0x61ef4192u, 0x2eaed755u, 0x37b5e614u, 0x1c98b5d7u, 0x05838496u, 0x821b9859u, 0x9b00a918u, 0xb02dfadbu,
    0xa936cb9au, 0xe6775d5du, 0xff6c6c1cu, 0xd4413fdfu, 0xcd5a0e9eu, 0x958424a2u, 0x8c9f15e3u, 0xa7b24620u, 0xbea97761u,
    0xf1e8e1a6u, 0xe8f3d0e7u, 0xc3de8324u, 0xdac5b265u, 0x5d5daeaau, 0x44469febu, 0x6f6bcc28u, 0x7670fd69u, 0x39316baeu,
    0x202a5aefu, 0x0b07092cu, 0x121c386du, 0xdf4636f3u, 0xc65d07b2u, 0xed705471u, 0xf46b6530u, 0xbb2af3f7u, 0xa231c2b6u,
    0x891c9175u, 0x9007a034u, 0x179fbcfbu, 0x0e848dbau, 0x25a9de79u, 0x3cb2ef38u, 0x73f379ffu, 0x6ae848beu, 0x41c51b7du,
    0x58de2a3cu, 0xf0794f05u, 0xe9627e44u, 0xc24f2d87u, 0xdb541cc6u, 0x94158a01u, 0x8d0ebb40u, 0xa623e883u, 0xbf38d9c2u,
    0x38a0c50du, 0x21bbf44cu, 0x0a96a78fu, 0x138d96ceu, 0x5ccc0009u, 0x45d73148u, 0x6efa628bu, 0x77e153cau, 0xbabb5d54u,
    0xa3a06c15u, 0x888d3fd6u, 0x91960e97u, 0xded79850u, 0xc7cca911u, 0xece1fad2u, 0xf5facb93u, 0x7262d75cu, 0x6b79e61du,
    0x4054b5deu, 0x594f849fu, 0x160e1258u, 0x0f152319u, 0x243870dau, 0x3d23419bu, 0x65fd6ba7u, 0x7ce65ae6u, 0x57cb0925u,
    0x4ed03864u, 0x0191aea3u, 0x188a9fe2u, 0x33a7cc21u, 0x2abcfd60u, 0xad24e1afu, 0xb43fd0eeu, 0x9f12832du, 0x8609b26cu,
    0xc94824abu, 0xd05315eau, 0xfb7e4629u, 0xe2657768u, 0x2f3f79f6u, 0x362448b7u, 0x1d091b74u, 0x04122a35u, 0x4b53bcf2u,
    0x52488db3u, 0x7965de70u, 0x607eef31u, 0xe7e6f3feu, 0xfefdc2bfu, 0xd5d0917cu, 0xcccba03du, 0x838a36fau, 0x9a9107bbu,
    0xb1bc5478u, 0xa8a76539u, 0x3b83984bu, 0x2298a90au, 0x09b5fac9u, 0x10aecb88u, 0x5fef5d4fu, 0x46f46c0eu, 0x6dd93fcdu,
    0x74c20e8cu, 0xf35a1243u, 0xea412302u, 0xc16c70c1u, 0xd8774180u, 0x9736d747u, 0x8e2de606u, 0xa500b5c5u, 0xbc1b8484u,
    0x71418a1au, 0x685abb5bu, 0x4377e898u, 0x5a6cd9d9u, 0x152d4f1eu, 0x0c367e5fu, 0x271b2d9cu, 0x3e001cddu, 0xb9980012u,
    0xa0833153u, 0x8bae6290u, 0x92b553d1u, 0xddf4c516u, 0xc4eff457u, 0xefc2a794u, 0xf6d996d5u, 0xae07bce9u, 0xb71c8da8u,
    0x9c31de6bu, 0x852aef2au, 0xca6b79edu, 0xd37048acu, 0xf85d1b6fu, 0xe1462a2eu, 0x66de36e1u, 0x7fc507a0u, 0x54e85463u,
    0x4df36522u, 0x02b2f3e5u, 0x1ba9c2a4u, 0x30849167u, 0x299fa026u, 0xe4c5aeb8u, 0xfdde9ff9u, 0xd6f3cc3au, 0xcfe8fd7bu,
    0x80a96bbcu, 0x99b25afdu, 0xb29f093eu, 0xab84387fu, 0x2c1c24b0u, 0x350715f1u, 0x1e2a4632u, 0x07317773u, 0x4870e1b4u,
    0x516bd0f5u, 0x7a468336u, 0x635db277u, 0xcbfad74eu, 0xd2e1e60fu, 0xf9ccb5ccu, 0xe0d7848du, 0xaf96124au, 0xb68d230bu,
    0x9da070c8u, 0x84bb4189u, 0x03235d46u, 0x1a386c07u, 0x31153fc4u, 0x280e0e85u, 0x674f9842u, 0x7e54a903u, 0x5579fac0u,
    0x4c62cb81u, 0x8138c51fu, 0x9823f45eu, 0xb30ea79du, 0xaa1596dcu, 0xe554001bu, 0xfc4f315au, 0xd7626299u, 0xce7953d8u,
    0x49e14f17u, 0x50fa7e56u, 0x7bd72d95u, 0x62cc1cd4u, 0x2d8d8a13u, 0x3496bb52u, 0x1fbbe891u, 0x06a0d9d0u, 0x5e7ef3ecu,
    0x4765c2adu, 0x6c48916eu, 0x7553a02fu, 0x3a1236e8u, 0x230907a9u, 0x0824546au, 0x113f652bu, 0x96a779e4u, 0x8fbc48a5u,
    0xa4911b66u, 0xbd8a2a27u, 0xf2cbbce0u, 0xebd08da1u, 0xc0fdde62u, 0xd9e6ef23u, 0x14bce1bdu, 0x0da7d0fcu, 0x268a833fu,
    0x3f91b27eu, 0x70d024b9u, 0x69cb15f8u, 0x42e6463bu, 0x5bfd777au, 0xdc656bb5u, 0xc57e5af4u, 0xee530937u, 0xf7483876u,
    0xb809aeb1u, 0xa1129ff0u, 0x8a3fcc33u, 0x9324fd72u,
  },
  {
    0x00000000u, 0x01c26a37u, 0x0384d46eu, 0x0246be59u, 0x0709a8dcu, 0x06cbc2ebu, 0x048d7cb2u, 0x054f1685u, 0x0e1351b8u,
    0x0fd13b8fu, 0x0d9785d6u, 0x0c55efe1u, 0x091af964u, 0x08d89353u, 0x0a9e2d0au, 0x0b5c473du, 0x1c26a370u, 0x1de4c947u,
    0x1fa2771eu, 0x1e601d29u, 0x1b2f0bacu, 0x1aed619bu, 0x18abdfc2u, 0x1969b5f5u, 0x1235f2c8u, 0x13f798ffu, 0x11b126a6u,
    0x10734c91u, 0x153c5a14u, 0x14fe3023u, 0x16b88e7au, 0x177ae44du, 0x384d46e0u, 0x398f2cd7u, 0x3bc9928eu, 0x3a0bf8b9u,
    0x3f44ee3cu, 0x3e86840bu, 0x3cc03a52u, 0x3d025065u, 0x365e1758u, 0x379c7d6fu, 0x35dac336u, 0x3418a901u, 0x3157bf84u,
    0x3095d5b3u, 0x32d36beau, 0x331101ddu, 0x246be590u, 0x25a98fa7u, 0x27ef31feu, 0x262d5bc9u, 0x23624d4cu, 0x22a0277bu,
    0x20e69922u, 0x2124f315u, 0x2a78b428u, 0x2bbade1fu, 0x29fc6046u, 0x283e0a71u, 0x2d711cf4u, 0x2cb376c3u, 0x2ef5c89au,
    0x2f37a2adu, 0x709a8dc0u, 0x7158e7f7u, 0x731e59aeu, 0x72dc3399u, 0x7793251cu, 0x76514f2bu, 0x7417f172u, 0x75d59b45u,
    0x7e89dc78u, 0x7f4bb64fu, 0x7d0d0816u, 0x7ccf6221u, 0x798074a4u, 0x78421e93u, 0x7a04a0cau, 0x7bc6cafdu, 0x6cbc2eb0u,
    0x6d7e4487u, 0x6f38fadeu, 0x6efa90e9u, 0x6bb5866cu, 0x6a77ec5bu, 0x68315202u, 0x69f33835u, 0x62af7f08u, 0x636d153fu,
    0x612bab66u, 0x60e9c151u, 0x65a6d7d4u, 0x6464bde3u, 0x662203bau, 0x67e0698du, 0x48d7cb20u, 0x4915a117u, 0x4b531f4eu,
    0x4a917579u, 0x4fde63fcu, 0x4e1c09cbu, 0x4c5ab792u, 0x4d98dda5u, 0x46c49a98u, 0x4706f0afu, 0x45404ef6u, 0x448224c1u,
    0x41cd3244u, 0x400f5873u, 0x4249e62au, 0x438b8c1du, 0x54f16850u, 0x55330267u, 0x5775bc3eu, 0x56b7d609u, 0x53f8c08cu,
    0x523aaabbu, 0x507c14e2u, 0x51be7ed5u, 0x5ae239e8u, 0x5b2053dfu, 0x5966ed86u, 0x58a487b1u, 0x5deb9134u, 0x5c29fb03u,
    0x5e6f455au, 0x5fad2f6du, 0xe1351b80u, 0xe0f771b7u, 0xe2b1cfeeu, 0xe373a5d9u, 0xe63cb35cu, 0xe7fed96bu, 0xe5b86732u,
    0xe47a0d05u, 0xef264a38u, 0xeee4200fu, 0xeca29e56u, 0xed60f461u, 0xe82fe2e4u, 0xe9ed88d3u, 0xebab368au, 0xea695cbdu,
    0xfd13b8f0u, 0xfcd1d2c7u, 0xfe976c9eu, 0xff5506a9u, 0xfa1a102cu, 0xfbd87a1bu, 0xf99ec442u, 0xf85cae75u, 0xf300e948u,
    0xf2c2837fu, 0xf0843d26u, 0xf1465711u, 0xf4094194u, 0xf5cb2ba3u, 0xf78d95fau, 0xf64fffcdu, 0xd9785d60u, 0xd8ba3757u,
    0xdafc890eu, 0xdb3ee339u, 0xde71f5bcu, 0xdfb39f8bu, 0xddf521d2u, 0xdc374be5u, 0xd76b0cd8u, 0xd6a966efu, 0xd4efd8b6u,
    0xd52db281u, 0xd062a404u, 0xd1a0ce33u, 0xd3e6706au, 0xd2241a5du, 0xc55efe10u, 0xc49c9427u, 0xc6da2a7eu, 0xc7184049u,
    0xc25756ccu, 0xc3953cfbu, 0xc1d382a2u, 0xc011e895u, 0xcb4dafa8u, 0xca8fc59fu, 0xc8c97bc6u, 0xc90b11f1u, 0xcc440774u,
    0xcd866d43u, 0xcfc0d31au, 0xce02b92du, 0x91af9640u, 0x906dfc77u, 0x922b422eu, 0x93e92819u, 0x96a63e9cu, 0x976454abu,
    0x9522eaf2u, 0x94e080c5u, 0x9fbcc7f8u, 0x9e7eadcfu, 0x9c381396u, 0x9dfa79a1u, 0x98b56f24u, 0x99770513u, 0x9b31bb4au,
    0x9af3d17du, 0x8d893530u, 0x8c4b5f07u, 0x8e0de15eu, 0x8fcf8b69u, 0x8a809decu, 0x8b42f7dbu, 0x89044982u, 0x88c623b5u,
    0x839a6488u, 0x82580ebfu, 0x801eb0e6u, 0x81dcdad1u, 0x8493cc54u, 0x8551a663u, 0x8717183au, 0x86d5720du, 0xa9e2d0a0u,
    0xa820ba97u, 0xaa6604ceu, 0xaba46ef9u, 0xaeeb787cu, 0xaf29124bu, 0xad6fac12u, 0xacadc625u, 0xa7f18118u, 0xa633eb2fu,
    0xa4755576u, 0xa5b73f41u, 0xa0f829c4u, 0xa13a43f3u, 0xa37cfdaau, 0xa2be979du, 0xb5c473d0u, 0xb40619e7u, 0xb640a7beu,
    0xb782cd89u, 0xb2cddb0cu, 0xb30fb13bu, 0xb1490f62u, 0xb08b6555u, 0xbbd72268u, 0xba15485fu, 0xb853f606u, 0xb9919c31u,
    0xbcde8ab4u, 0xbd1ce083u, 0xbf5a5edau, 0xbe9834edu,
  },
  {
    0x00000000u, 0xb8bc6765u, 0xaa09c88bu, 0x12b5afeeu, 0x8f629757u, 0x37def032u, 0x256b5fdcu, 0x9dd738b9u, 0xc5b428efu,
    0x7d084f8au, 0x6fbde064u, 0xd7018701u, 0x4ad6bfb8u, 0xf26ad8ddu, 0xe0df7733u, 0x58631056u, 0x5019579fu, 0xe8a530fau,
    0xfa109f14u, 0x42acf871u, 0xdf7bc0c8u, 0x67c7a7adu, 0x75720843u, 0xcdce6f26u, 0x95ad7f70u, 0x2d111815u, 0x3fa4b7fbu,
    0x8718d09eu, 0x1acfe827u, 0xa2738f42u, 0xb0c620acu, 0x087a47c9u, 0xa032af3eu, 0x188ec85bu, 0x0a3b67b5u, 0xb28700d0u,
    0x2f503869u, 0x97ec5f0cu, 0x8559f0e2u, 0x3de59787u, 0x658687d1u, 0xdd3ae0b4u, 0xcf8f4f5au, 0x7733283fu, 0xeae41086u,
    0x525877e3u, 0x40edd80du, 0xf851bf68u, 0xf02bf8a1u, 0x48979fc4u, 0x5a22302au, 0xe29e574fu, 0x7f496ff6u, 0xc7f50893u,
    0xd540a77du, 0x6dfcc018u, 0x359fd04eu, 0x8d23b72bu, 0x9f9618c5u, 0x272a7fa0u, 0xbafd4719u, 0x0241207cu, 0x10f48f92u,
    0xa848e8f7u, 0x9b14583du, 0x23a83f58u, 0x311d90b6u, 0x89a1f7d3u, 0x1476cf6au, 0xaccaa80fu, 0xbe7f07e1u, 0x06c36084u,
    0x5ea070d2u, 0xe61c17b7u, 0xf4a9b859u, 0x4c15df3cu, 0xd1c2e785u, 0x697e80e0u, 0x7bcb2f0eu, 0xc377486bu, 0xcb0d0fa2u,
    0x73b168c7u, 0x6104c729u, 0xd9b8a04cu, 0x446f98f5u, 0xfcd3ff90u, 0xee66507eu, 0x56da371bu, 0x0eb9274du, 0xb6054028u,
    0xa4b0efc6u, 0x1c0c88a3u, 0x81dbb01au, 0x3967d77fu, 0x2bd27891u, 0x936e1ff4u, 0x3b26f703u, 0x839a9066u, 0x912f3f88u,
    0x299358edu, 0xb4446054u, 0x0cf80731u, 0x1e4da8dfu, 0xa6f1cfbau, 0xfe92dfecu, 0x462eb889u, 0x549b1767u, 0xec277002u,
    0x71f048bbu, 0xc94c2fdeu, 0xdbf98030u, 0x6345e755u, 0x6b3fa09cu, 0xd383c7f9u, 0xc1366817u, 0x798a0f72u, 0xe45d37cbu,
    0x5ce150aeu, 0x4e54ff40u, 0xf6e89825u, 0xae8b8873u, 0x1637ef16u, 0x048240f8u, 0xbc3e279du, 0x21e91f24u, 0x99557841u,
    0x8be0d7afu, 0x335cb0cau, 0xed59b63bu, 0x55e5d15eu, 0x47507eb0u, 0xffec19d5u, 0x623b216cu, 0xda874609u, 0xc832e9e7u,
    0x708e8e82u, 0x28ed9ed4u, 0x9051f9b1u, 0x82e4565fu, 0x3a58313au, 0xa78f0983u, 0x1f336ee6u, 0x0d86c108u, 0xb53aa66du,
    0xbd40e1a4u, 0x05fc86c1u, 0x1749292fu, 0xaff54e4au, 0x322276f3u, 0x8a9e1196u, 0x982bbe78u, 0x2097d91du, 0x78f4c94bu,
    0xc048ae2eu, 0xd2fd01c0u, 0x6a4166a5u, 0xf7965e1cu, 0x4f2a3979u, 0x5d9f9697u, 0xe523f1f2u, 0x4d6b1905u, 0xf5d77e60u,
    0xe762d18eu, 0x5fdeb6ebu, 0xc2098e52u, 0x7ab5e937u, 0x680046d9u, 0xd0bc21bcu, 0x88df31eau, 0x3063568fu, 0x22d6f961u,
    0x9a6a9e04u, 0x07bda6bdu, 0xbf01c1d8u, 0xadb46e36u, 0x15080953u, 0x1d724e9au, 0xa5ce29ffu, 0xb77b8611u, 0x0fc7e174u,
    0x9210d9cdu, 0x2aacbea8u, 0x38191146u, 0x80a57623u, 0xd8c66675u, 0x607a0110u, 0x72cfaefeu, 0xca73c99bu, 0x57a4f122u,
    0xef189647u, 0xfdad39a9u, 0x45115eccu, 0x764dee06u, 0xcef18963u, 0xdc44268du, 0x64f841e8u, 0xf92f7951u, 0x41931e34u,
    0x5326b1dau, 0xeb9ad6bfu, 0xb3f9c6e9u, 0x0b45a18cu, 0x19f00e62u, 0xa14c6907u, 0x3c9b51beu, 0x842736dbu, 0x96929935u,
    0x2e2efe50u, 0x2654b999u, 0x9ee8defcu, 0x8c5d7112u, 0x34e11677u, 0xa9362eceu, 0x118a49abu, 0x033fe645u, 0xbb838120u,
    0xe3e09176u, 0x5b5cf613u, 0x49e959fdu, 0xf1553e98u, 0x6c820621u, 0xd43e6144u, 0xc68bceaau, 0x7e37a9cfu, 0xd67f4138u,
    0x6ec3265du, 0x7c7689b3u, 0xc4caeed6u, 0x591dd66fu, 0xe1a1b10au, 0xf3141ee4u, 0x4ba87981u, 0x13cb69d7u, 0xab770eb2u,
    0xb9c2a15cu, 0x017ec639u, 0x9ca9fe80u, 0x241599e5u, 0x36a0360bu, 0x8e1c516eu, 0x866616a7u, 0x3eda71c2u, 0x2c6fde2cu,
    0x94d3b949u, 0x090481f0u, 0xb1b8e695u, 0xa30d497bu, 0x1bb12e1eu, 0x43d23e48u, 0xfb6e592du, 0xe9dbf6c3u, 0x516791a6u,
    0xccb0a91fu, 0x740cce7au, 0x66b96194u, 0xde0506f1u,
  },
};

/* The CRC register after @p n more bytes (table, four bytes a step). */
static uint32_t tf_stun__crc_table_step(uint32_t c, const uint8_t *p, size_t n)
{
  for (; n >= 4; n -= 4, p += 4) {
    c ^= (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
    c = tf_stun__crc_table[3][c & 0xFFu] ^ tf_stun__crc_table[2][(c >> 8) & 0xFFu] ^
        tf_stun__crc_table[1][(c >> 16) & 0xFFu] ^ tf_stun__crc_table[0][c >> 24];
  }
  for (; n > 0; n--, p++) c = tf_stun__crc_table[0][(c ^ *p) & 0xFFu] ^ (c >> 8);
  return c;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TF_STUN__CRC_CLMUL 1
/* The register that, run through 16 - r zero bytes, becomes 0xFFFFFFFF (r = 1..15): a message
 * of 16k + r bytes is taken as 16 - r zero bytes and the message, started from this register,
 * so every block is whole (the zero-byte step of the register is linear and invertible). */
static const uint32_t tf_stun__crc_pre[16] = {
    0x00000000u, 0x358d0ff4u, 0xbae5bb0au, 0xe06f0ca5u, 0xa65c386bu, 0xdac6e4e8u, 0xae0bacaeu, 0x31c08543u,
    0xefe4d0afu, 0x46865aa9u, 0xaf4c9d16u, 0xf47bf9ccu, 0x9226f562u, 0xa32e2681u, 0x9a1c9d90u, 0xf0958fd9u};

/* The CRC register after @p n bytes (at least 1) from the initial 0xFFFFFFFF, by carry-less
 * multiplication (PCLMULQDQ), no table: each 16-byte block is folded into the next, the last
 * 128 bits reduced to 32 (Gopal et al., "Fast CRC Computation for Generic Polynomials Using
 * PCLMULQDQ Instruction", Intel 2009; the bit-reflected constants for 0xEDB88320 given there).
 * Messages are checked after the kernel has run in between, when a table is out of the cache:
 * this touches no data but the message. */
__attribute__((target("pclmul,sse2"))) static uint32_t tf_stun__crc_clmul(const uint8_t *p, size_t n)
{
  const __m128i fold = _mm_set_epi64x(0x00ccaa009eLL, 0x01751997d0LL); /* x^(128-32), x^(128+32) mod P */
  const __m128i k5 = _mm_set_epi64x(0, 0x0163cd6124LL);                /* x^64 mod P */
  const __m128i poly = _mm_set_epi64x(0x01f7011641LL, 0x01db710641LL); /* Barrett: u', P' */
  const __m128i low32 = _mm_setr_epi32(-1, 0, -1, 0);
  size_t r = n % 16;
  __m128i x;
  if (r) {
    uint8_t first[16] = {0};
    memcpy(first + 16 - r, p, r);
    x = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(const void *)first),
                      _mm_cvtsi32_si128((int)tf_stun__crc_pre[r]));
    p += r;
    n -= r;
  } else {
    x = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(const void *)p), _mm_cvtsi32_si128(-1));
    p += 16;
    n -= 16;
  }
  for (; n >= 16; p += 16, n -= 16) {
    __m128i lo = _mm_clmulepi64_si128(x, fold, 0x00);
    __m128i hi = _mm_clmulepi64_si128(x, fold, 0x11);
    x = _mm_xor_si128(_mm_xor_si128(lo, hi), _mm_loadu_si128((const __m128i *)(const void *)p));
  }
  /* 128 bits to 64 */
  __m128i t = _mm_clmulepi64_si128(x, fold, 0x10);
  x = _mm_xor_si128(_mm_srli_si128(x, 8), t);
  /* 64 bits to 32 */
  t = _mm_srli_si128(x, 4);
  x = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x, low32), k5, 0x00), t);
  /* Barrett reduction to the 32-bit register */
  t = _mm_clmulepi64_si128(_mm_and_si128(x, low32), poly, 0x10);
  t = _mm_clmulepi64_si128(_mm_and_si128(t, low32), poly, 0x00);
  x = _mm_xor_si128(x, t);
  return (uint32_t)_mm_cvtsi128_si32(_mm_srli_si128(x, 4));
}
#endif

static uint32_t tf_stun__crc32(const uint8_t *p, size_t n)
{
#ifdef TF_STUN__CRC_CLMUL
  if (n > 0 && __builtin_cpu_supports("pclmul")) return tf_stun__crc_clmul(p, n) ^ 0xFFFFFFFFu;
#endif
  return tf_stun__crc_table_step(0xFFFFFFFFu, p, n) ^ 0xFFFFFFFFu;
}

static uint16_t tf_stun__get16(const uint8_t *p) { return (uint16_t)(((unsigned)p[0] << 8) | p[1]); }

static uint32_t tf_stun__get32(const uint8_t *p)
{
  return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static void tf_stun__put16(uint8_t *p, uint16_t v)
{
  p[0] = (uint8_t)(v >> 8);
  p[1] = (uint8_t)v;
}

static void tf_stun__put32(uint8_t *p, uint32_t v)
{
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

static size_t tf_stun__pad4(size_t n) { return (4 - n % 4) % 4; }

static int tf_stun__is_xor_type(uint16_t type)
{
  return type == TF_STUN_ATTR_XOR_MAPPED_ADDRESS || type == TF_STUN_ATTR_XOR_PEER_ADDRESS ||
         type == TF_STUN_ATTR_XOR_RELAYED_ADDRESS;
}

static int tf_stun__is_address_type(uint16_t type)
{
  return tf_stun__is_xor_type(type) || type == TF_STUN_ATTR_MAPPED_ADDRESS || type == TF_STUN_ATTR_ALTERNATE_SERVER;
}

/* Message type <-> method and class (RFC 8489 §5). */
static uint16_t tf_stun__type(int method, int cls)
{
  unsigned m = (unsigned)method, c = (unsigned)cls;
  return (uint16_t)((m & 0x000Fu) | ((m & 0x0070u) << 1) | ((m & 0x0F80u) << 2) | ((c & 1u) << 4) | ((c & 2u) << 7));
}

static int tf_stun__method_of(uint16_t t) { return (t & 0x000F) | ((t & 0x00E0) >> 1) | ((t & 0x3E00) >> 2); }

static int tf_stun__class_of(uint16_t t) { return ((t >> 4) & 1) | ((t >> 7) & 2); }

/* A reason-coded decoding failure: "CODE at byte N: why". */
static tf_err tf_stun__reject(tf_err code, const char *reason, size_t at, const char *why)
{
  return tf_error__set(code, "%s at byte %zu: %s", reason, at, why);
}

static const uint8_t *tf_stun__value(const tf_stun_msg *m, const struct tf_stun__attr *a)
{
  return m->buf + a->off + 4;
}

static const struct tf_stun__attr *tf_stun__first(const tf_stun_msg *m, uint16_t type)
{
  for (size_t i = 0; i < m->nattrs; i++)
    if (m->attrs[i].type == type) return &m->attrs[i];
  return NULL;
}

/* An attribute a decoded message holds at most once near its end (MESSAGE-INTEGRITY, which
 * only FINGERPRINT and MESSAGE-INTEGRITY-SHA256 may follow; FINGERPRINT, the last), found
 * from the end. */
static const struct tf_stun__attr *tf_stun__trailer(const tf_stun_msg *m, uint16_t type)
{
  for (size_t i = m->nattrs; i-- > 0;)
    if (m->attrs[i].type == type) return &m->attrs[i];
  return NULL;
}

/* ERROR-CODE reason phrase, trailing NULs stripped (coturn pads with them). */
static tf_err tf_stun__cache_reason(tf_stun_msg *m, const struct tf_stun__attr *a)
{
  if (m->reason || a->len < 4) return TF_OK;
  const uint8_t *v = tf_stun__value(m, a);
  size_t n = (size_t)a->len - 4;
  while (n > 0 && v[4 + n - 1] == 0) n--;
  char *r = n < sizeof(m->reason_buf) ? m->reason_buf : malloc(n + 1); /* decoded ones always fit */
  if (!r) return tf_error__nomem();
  if (n) memcpy(r, v + 4, n);
  r[n] = '\0';
  m->reason = r;
  return TF_OK;
}

/* Decode an address value; 0, or -1 with *why set. */
static int tf_stun__decode_address(const uint8_t *v, size_t len, const uint8_t *tid, int xored, tf_addr *addr,
                                   uint16_t *port, const char **code, const char **why)
{
  if (len < 4) {
    *code = "BAD_ADDRESS_LENGTH";
    *why = "address shorter than 4 bytes";
    return -1;
  }
  uint8_t fam = v[1];
  if (fam != 1 && fam != 2) {
    *code = "BAD_ADDRESS_FAMILY";
    *why = "address family is not 0x01 (IPv4) or 0x02 (IPv6)";
    return -1;
  }
  size_t alen = fam == 1 ? 4 : 16;
  if (len != 4 + alen) {
    *code = "BAD_ADDRESS_LENGTH";
    *why = fam == 1 ? "an IPv4 address must be 8 bytes long" : "an IPv6 address must be 20 bytes long";
    return -1;
  }
  tf_addr a;
  memset(&a, 0, sizeof(a));
  a.family = fam == 1 ? TF_AF_INET : TF_AF_INET6;
  uint16_t p = tf_stun__get16(v + 2);
  memcpy(a.bytes, v + 4, alen);
  if (xored) {
    uint8_t mask[16];
    tf_stun__put32(mask, TF_STUN__COOKIE);
    memcpy(mask + 4, tid, TF_STUN_TID_SIZE);
    p ^= (uint16_t)(TF_STUN__COOKIE >> 16);
    for (size_t i = 0; i < alen; i++) a.bytes[i] ^= mask[i];
  }
  if (addr) *addr = a;
  if (port) *port = p;
  return 0;
}

/* Comprehension-required types (0x0000-0x7FFF) a TURN client understands. */
static int tf_stun__known_required(uint16_t t)
{
  static const uint16_t known[] = {0x0001, 0x0006, 0x0008, 0x0009, 0x000A, 0x000C, 0x000D,
                                   0x0012, 0x0013, 0x0014, 0x0015, 0x0016, 0x0017, 0x0018,
                                   0x0019, 0x001A, 0x001C, 0x001D, 0x001E, 0x0020, 0x0022};
  for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
    if (known[i] == t) return 1;
  return 0;
}

/* The checks of one attribute value: sizes the RFCs fix and, for a response
 * (@p response), non-empty REALM / NONCE and no unknown comprehension-required type. */
static tf_err tf_stun__check_value(const tf_stun_msg *m, const struct tf_stun__attr *a, int response)
{
  const uint8_t *v = tf_stun__value(m, a);
  size_t at = a->off;
  const char *code = NULL, *why = NULL;
  switch (a->type) {
  case TF_STUN_ATTR_MAPPED_ADDRESS:
  case TF_STUN_ATTR_XOR_PEER_ADDRESS:
  case TF_STUN_ATTR_XOR_RELAYED_ADDRESS:
  case TF_STUN_ATTR_XOR_MAPPED_ADDRESS:
    /* ALTERNATE-SERVER is checked when read (tf_stun_msg_address), as the reference does */
    if (tf_stun__decode_address(v, a->len, m->buf + 8, 0, NULL, NULL, &code, &why) < 0)
      return tf_stun__reject(TF_EPROTO, code, at, why);
    break;
  case TF_STUN_ATTR_LIFETIME:
  case TF_STUN_ATTR_REQUESTED_TRANSPORT:
  case TF_STUN_ATTR_CHANNEL_NUMBER:
  case TF_STUN_ATTR_REQUESTED_ADDRESS_FAMILY:
    if (a->len != 4) return tf_stun__reject(TF_EPROTO, "BAD_FIXED_LENGTH", at, "attribute must be 4 bytes long");
    break;
  case TF_STUN_ATTR_RESERVATION_TOKEN:
    if (a->len != 8)
      return tf_stun__reject(TF_EPROTO, "BAD_FIXED_LENGTH", at, "RESERVATION-TOKEN must be 8 bytes long");
    break;
  case TF_STUN_ATTR_ERROR_CODE:
    if (a->len < 4 || a->len - 4 > TF_STUN__MAX_TEXT)
      return tf_stun__reject(TF_EPROTO, "BAD_ERROR_CODE_LENGTH", at,
                             "ERROR-CODE must hold 4 bytes and a reason of at most 763 bytes");
    if ((v[2] & 7) < 3 || (v[2] & 7) > 6)
      return tf_stun__reject(TF_EPROTO, "BAD_ERROR_CODE", at, "ERROR-CODE class must be 3-6");
    if (v[3] > 99) return tf_stun__reject(TF_EPROTO, "BAD_ERROR_CODE", at, "ERROR-CODE number must be 0-99");
    break;
  case TF_STUN_ATTR_UNKNOWN_ATTRIBUTES:
    if (a->len % 2)
      return tf_stun__reject(TF_EPROTO, "BAD_UNKNOWN_ATTRIBUTES_LENGTH", at,
                             "UNKNOWN-ATTRIBUTES must be a list of 16-bit types");
    break;
  case TF_STUN_ATTR_REALM:
  case TF_STUN_ATTR_NONCE:
    if (!response) break;
    if (a->len == 0)
      return tf_stun__reject(TF_EPROTO, a->type == TF_STUN_ATTR_REALM ? "EMPTY_REALM" : "EMPTY_NONCE", at,
                             a->type == TF_STUN_ATTR_REALM ? "REALM is empty" : "NONCE is empty");
    if (a->len > TF_STUN__MAX_TEXT)
      return tf_stun__reject(TF_EPROTO, a->type == TF_STUN_ATTR_REALM ? "REALM_TOO_LONG" : "NONCE_TOO_LONG", at,
                             "longer than 763 bytes");
    break;
  default:
    if (response && a->type < 0x8000 && !tf_stun__known_required(a->type))
      return tf_error__set(TF_EPROTO, "UNKNOWN_COMPREHENSION_REQUIRED at byte %zu: attribute 0x%04x", at, a->type);
    break;
  }
  return TF_OK;
}

/* Structure: header, attribute walk, attribute values, FINGERPRINT (the
 * reference order). Fills *m (which the caller zeroed). */
static tf_err tf_stun__decode_into(tf_stun_msg *m, const uint8_t *p, size_t len, int response)
{
  if (len < TF_STUN__HEADER)
    return tf_stun__reject(TF_EPROTO, "TRUNCATED_HEADER", len, "shorter than the 20-byte header");
  uint16_t type = tf_stun__get16(p);
  size_t mlen = tf_stun__get16(p + 2);
  if (type & 0xC000)
    return tf_stun__reject(TF_EPROTO, "NOT_STUN_TOP_BITS", 0, "the two most significant bits must be zero");
  if (tf_stun__get32(p + 4) != TF_STUN__COOKIE)
    return tf_stun__reject(TF_EPROTO, "BAD_MAGIC_COOKIE", 4, "magic cookie is not 0x2112A442");
  if (mlen % 4) return tf_stun__reject(TF_EPROTO, "LENGTH_NOT_MULTIPLE_OF_4", 2, "length is not a multiple of 4");
  if (TF_STUN__HEADER + mlen != len)
    return tf_stun__reject(TF_EPROTO, "LENGTH_MISMATCH", 2, "20 + length differs from the message size");
  if (len > TF_STUN_MAX_MESSAGE)
    return tf_stun__reject(TF_EPROTO, "MESSAGE_TOO_LARGE", TF_STUN_MAX_MESSAGE, "longer than 4096 bytes");
  memcpy(m->buf, p, len);
  m->len = len;
  size_t off = TF_STUN__HEADER;
  while (off < len) {
    if (len - off < 4) return tf_stun__reject(TF_EPROTO, "ATTR_OVERRUN", off, "attribute header cut short");
    uint16_t at = tf_stun__get16(m->buf + off);
    size_t al = tf_stun__get16(m->buf + off + 2);
    if (al + tf_stun__pad4(al) > len - off - 4)
      return tf_stun__reject(TF_EPROTO, "ATTR_OVERRUN", off, "attribute runs past the end of the message");
    if (m->has_fp)
      return tf_stun__reject(TF_EPROTO, "ATTR_AFTER_FINGERPRINT", off, "FINGERPRINT must be the last attribute");
    if (m->has_mi && at != TF_STUN_ATTR_FINGERPRINT && at != TF_STUN__ATTR_MI_SHA256)
      return tf_stun__reject(TF_EPROTO, "ATTR_AFTER_MESSAGE_INTEGRITY", off,
                             "only FINGERPRINT may follow MESSAGE-INTEGRITY");
    if (at == TF_STUN_ATTR_MESSAGE_INTEGRITY) {
      if (al != TF_STUN__MI_SIZE)
        return tf_stun__reject(TF_EPROTO, "BAD_MESSAGE_INTEGRITY_LENGTH", off,
                               "MESSAGE-INTEGRITY must be 20 bytes (HMAC-SHA1)");
      m->has_mi = 1;
    } else if (at == TF_STUN_ATTR_FINGERPRINT) {
      if (al != 4) return tf_stun__reject(TF_EPROTO, "BAD_FINGERPRINT_LENGTH", off, "FINGERPRINT must be 4 bytes");
      m->has_fp = 1;
    }
    if (m->nattrs == TF_STUN_MAX_ATTRIBUTES)
      return tf_stun__reject(TF_EPROTO, "TOO_MANY_ATTRIBUTES", off, "more than 64 attributes");
    m->attrs[m->nattrs].type = at;
    m->attrs[m->nattrs].len = (uint16_t)al;
    m->attrs[m->nattrs].off = (uint16_t)off;
    m->nattrs++;
    off += 4 + al + tf_stun__pad4(al);
  }
  for (size_t i = 0; i < m->nattrs; i++) {
    tf_err rc = tf_stun__check_value(m, &m->attrs[i], response);
    if (rc < 0) return rc;
  }
  const struct tf_stun__attr *fp = m->has_fp ? tf_stun__trailer(m, TF_STUN_ATTR_FINGERPRINT) : NULL;
  if (fp) {
    uint32_t want = tf_stun__crc32(m->buf, fp->off) ^ TF_STUN__FP_XOR;
    if (tf_stun__get32(tf_stun__value(m, fp)) != want)
      return tf_stun__reject(TF_EPROTO, "FINGERPRINT_MISMATCH", fp->off, "CRC-32 does not match the message");
  }
  const struct tf_stun__attr *ec = tf_stun__first(m, TF_STUN_ATTR_ERROR_CODE);
  if (ec) return tf_stun__cache_reason(m, ec);
  return TF_OK;
}

static void tf_stun__free_reason(tf_stun_msg *m)
{
  if (m->reason != m->reason_buf) free(m->reason);
  m->reason = NULL;
}

static void tf_stun__release(tf_stun_msg *m)
{
  tf_stun__free_reason(m);
  free(m);
}

size_t tf_stun_max_message(void) { return TF_STUN_MAX_MESSAGE; }

tf_err tf_stun_decode(tf_stun_msg **out, const void *data, size_t len)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(data || len == 0);
  tf_stun_msg *m = calloc(1, sizeof(*m));
  if (!m) return tf_error__nomem();
  tf_err rc = tf_stun__decode_into(m, data ? data : (const void *)"", len, 0);
  if (rc < 0) {
    tf_stun__release(m);
    return rc;
  }
  *out = m;
  return TF_OK;
}

/* HMAC-SHA1 over the message up to the attribute at @p mi_off, with the header
 * length patched to end just after a 24-byte MESSAGE-INTEGRITY: the patched
 * header, then the attributes, hashed in place. */
static void tf_stun__hmac(uint8_t mac[TF_STUN__MI_SIZE], const uint8_t *buf, size_t mi_off, const tf_mac *key)
{
  uint8_t header[TF_STUN__HEADER];
  memcpy(header, buf, sizeof(header));
  tf_stun__put16(header + 2, (uint16_t)(mi_off - TF_STUN__HEADER + 4 + TF_STUN__MI_SIZE));
  tf_mac__sign(key, header, sizeof(header), buf + TF_STUN__HEADER, mi_off - TF_STUN__HEADER, mac);
}

/* 0 valid, TF_EAUTH mismatch, TF_ENOTFOUND no MESSAGE-INTEGRITY. */
static tf_err tf_stun__check_mi(const tf_stun_msg *m, const tf_mac *key)
{
  const struct tf_stun__attr *mi = m->has_mi ? tf_stun__trailer(m, TF_STUN_ATTR_MESSAGE_INTEGRITY) : NULL;
  if (!mi) return tf_error__set(TF_ENOTFOUND, "MISSING_MESSAGE_INTEGRITY at byte %zu: no MESSAGE-INTEGRITY", m->len);
  uint8_t mac[TF_STUN__MI_SIZE];
  tf_stun__hmac(mac, m->buf, mi->off, key);
  int ok = tf_crypto__memeq(mac, tf_stun__value(m, mi), TF_STUN__MI_SIZE);
  tf_crypto__wipe(mac, sizeof(mac));
  if (!ok) return tf_stun__reject(TF_EAUTH, "INTEGRITY_MISMATCH", mi->off, "MESSAGE-INTEGRITY does not match the key");
  return TF_OK;
}

tf_err tf_stun_check_integrity(const void *data, size_t len, const uint8_t *key, size_t key_len)
{
  TF_ASSERT_ARG(data || len == 0);
  TF_ASSERT_ARG(key);
  TF_ASSERT_ARG(key_len > 0);
  tf_stun_msg *m = calloc(1, sizeof(*m));
  if (!m) return tf_error__nomem();
  tf_err rc = tf_stun__decode_into(m, data ? data : (const void *)"", len, 0);
  if (rc >= 0) {
    tf_mac mac;
    tf_mac__init(&mac, key, key_len);
    rc = tf_stun__check_mi(m, &mac);
    tf_mac__wipe(&mac);
  }
  tf_stun__release(m);
  return rc;
}

/* The response checks after decoding: class, method, transaction id, required
 * attributes, MESSAGE-INTEGRITY (the reference order). */
static tf_err tf_stun__validate(const tf_stun_msg *m, const uint8_t *tid, int method, const tf_mac *key)
{
  uint16_t type = tf_stun__get16(m->buf);
  int cls = tf_stun__class_of(type);
  if (cls != TF_STUN_SUCCESS && cls != TF_STUN_ERROR)
    return tf_stun__reject(TF_EPROTO, "NOT_A_RESPONSE", 0, "not a success or error response");
  if (tf_stun__method_of(type) != method)
    return tf_error__set(TF_EPROTO, "METHOD_MISMATCH at byte 0: response method 0x%03x, request method 0x%03x",
                         (unsigned)tf_stun__method_of(type), (unsigned)method);
  if (memcmp(m->buf + 8, tid, TF_STUN_TID_SIZE) != 0)
    return tf_stun__reject(TF_EPROTO, "TRANSACTION_ID_MISMATCH", 8, "not the request's transaction id");
  if (cls == TF_STUN_ERROR) {
    const struct tf_stun__attr *ec = tf_stun__first(m, TF_STUN_ATTR_ERROR_CODE);
    if (!ec) return tf_stun__reject(TF_EPROTO, "MISSING_ERROR_CODE", m->len, "error response without ERROR-CODE");
    const uint8_t *v = tf_stun__value(m, ec);
    int code = (v[2] & 7) * 100 + v[3];
    if ((code == 401 || code == 438) &&
        (!tf_stun__first(m, TF_STUN_ATTR_REALM) || !tf_stun__first(m, TF_STUN_ATTR_NONCE)))
      return tf_error__set(TF_EPROTO, "MISSING_REALM_OR_NONCE at byte %zu: %d without REALM and NONCE", m->len, code);
  } else if (method == TF_STUN_ALLOCATE) {
    if (!tf_stun__first(m, TF_STUN_ATTR_XOR_RELAYED_ADDRESS))
      return tf_stun__reject(TF_EPROTO, "MISSING_XOR_RELAYED_ADDRESS", m->len,
                             "Allocate success without XOR-RELAYED-ADDRESS");
    if (!tf_stun__first(m, TF_STUN_ATTR_XOR_MAPPED_ADDRESS))
      return tf_stun__reject(TF_EPROTO, "MISSING_XOR_MAPPED_ADDRESS", m->len,
                             "Allocate success without XOR-MAPPED-ADDRESS");
    if (!tf_stun__first(m, TF_STUN_ATTR_LIFETIME))
      return tf_stun__reject(TF_EPROTO, "MISSING_LIFETIME", m->len, "Allocate success without LIFETIME");
  }
  if (key) {
    if (!m->has_mi) {
      if (cls == TF_STUN_SUCCESS)
        return tf_stun__reject(TF_EAUTH, "MISSING_MESSAGE_INTEGRITY", m->len,
                               "success response to an authenticated request without MESSAGE-INTEGRITY");
    } else {
      tf_err rc = tf_stun__check_mi(m, key);
      if (rc < 0) return rc;
    }
  }
  return TF_OK;
}

tf_err tf_stun_validate_response(tf_stun_msg **out, const void *data, size_t len, const uint8_t *tid, int method,
                                 const uint8_t *key, size_t key_len)
{
  TF_ASSERT_ARG(data || len == 0);
  TF_ASSERT_ARG(tid);
  TF_ASSERT_ARG(method > 0 && method <= 0xFFF);
  TF_ASSERT_ARG(!key || key_len > 0);
  tf_stun_msg *m = calloc(1, sizeof(*m));
  if (!m) return tf_error__nomem();
  tf_err rc = tf_stun__decode_into(m, data ? data : (const void *)"", len, 1);
  if (rc >= 0) {
    tf_mac mac;
    if (key) tf_mac__init(&mac, key, key_len);
    rc = tf_stun__validate(m, tid, method, key ? &mac : NULL);
    if (key) tf_mac__wipe(&mac);
  }
  if (rc < 0 || !out) {
    tf_stun__release(m);
    return rc;
  }
  *out = m;
  return TF_OK;
}

tf_err tf_stun_long_term_key(uint8_t *key, const char *username, const char *realm, const char *password)
{
  TF_ASSERT_ARG(key);
  TF_ASSERT_ARG(username);
  TF_ASSERT_ARG(realm);
  TF_ASSERT_ARG(password);
  const char *parts[] = {username, ":", realm, ":", password};
  tf_mac__md5(key, parts, 5);
  return TF_OK;
}

/* ---- encoder ---- */

void tf_stun__msg_clear(tf_stun_msg *m)
{
  m->len = 0;
  m->nattrs = 0;
  m->has_mi = m->has_fp = 0;
  m->reason = NULL;
}

void tf_stun__msg_dispose(tf_stun_msg *m) { tf_stun__free_reason(m); }

tf_err tf_stun__msg_begin(tf_stun_msg *m, int method, int cls, const uint8_t *tid)
{
  tf_stun__msg_clear(m);
  tf_stun__put16(m->buf, tf_stun__type(method, cls));
  tf_stun__put16(m->buf + 2, 0);
  tf_stun__put32(m->buf + 4, TF_STUN__COOKIE);
  if (tid) memcpy(m->buf + 8, tid, TF_STUN_TID_SIZE);
  else if (RAND_bytes(m->buf + 8, TF_STUN_TID_SIZE) != 1)
    return tf_error__set(TF_ERROR, "transaction id: the CSPRNG failed (OpenSSL RAND_bytes)");
  m->len = TF_STUN__HEADER;
  return TF_OK;
}

tf_err tf_stun__msg_decode(tf_stun_msg *m, const void *data, size_t len)
{
  tf_stun__msg_clear(m);
  return tf_stun__decode_into(m, data, len, 0);
}

tf_err tf_stun__response_decode(tf_stun_msg *m, const void *data, size_t len, const uint8_t *tid, int method,
                                const tf_mac *key)
{
  tf_stun__msg_clear(m);
  tf_err rc = tf_stun__decode_into(m, data, len, 1);
  if (rc >= 0) rc = tf_stun__validate(m, tid, method, key);
  return rc;
}

tf_err tf_stun_msg_new(tf_stun_msg **out, int method, int cls, const uint8_t *tid)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(method > 0 && method <= 0xFFF);
  TF_ASSERT_ARG(cls >= TF_STUN_REQUEST && cls <= TF_STUN_ERROR);
  tf_stun_msg *m = malloc(sizeof(*m));
  if (!m) return tf_error__nomem();
  tf_err rc = tf_stun__msg_begin(m, method, cls, tid);
  if (rc < 0) {
    tf_stun__release(m);
    return rc;
  }
  *out = m;
  return TF_OK;
}

/* Append a TLV without the state checks; the caller checked them. */
static tf_err tf_stun__append(tf_stun_msg *m, uint16_t type, const void *value, size_t len)
{
  if (m->nattrs == TF_STUN_MAX_ATTRIBUTES)
    return tf_error__set(TF_EBUFS, "attribute 0x%04x: a message holds at most %d attributes", type,
                         TF_STUN_MAX_ATTRIBUTES);
  size_t need = 4 + len + tf_stun__pad4(len);
  if (len > 0xFFFF || need > TF_STUN_MAX_MESSAGE - m->len)
    return tf_error__set(TF_EBUFS, "attribute 0x%04x: %zu bytes would exceed the %d-byte message limit", type, len,
                         TF_STUN_MAX_MESSAGE);
  uint8_t *p = m->buf + m->len;
  /* the bookkeeping first and the value's copy last, so nothing waits on the copy */
  tf_stun__put32(p, (uint32_t)type << 16 | (uint32_t)len);
  if (len % 4) memset(p + need - 4, 0, 4); /* the last word: its padding stays zero under the value */
  m->attrs[m->nattrs].type = type;
  m->attrs[m->nattrs].len = (uint16_t)len;
  m->attrs[m->nattrs].off = (uint16_t)m->len;
  m->nattrs++;
  m->len += need;
  tf_stun__put16(m->buf + 2, (uint16_t)(m->len - TF_STUN__HEADER));
  if (len) memcpy(p + 4, value, len);
  return TF_OK;
}

tf_err tf_stun_msg_add(tf_stun_msg *msg, uint16_t type, const void *value, size_t len)
{
  TF_ASSERT_ARG(msg);
  TF_ASSERT_ARG(value || len == 0);
  if (type == TF_STUN_ATTR_MESSAGE_INTEGRITY || type == TF_STUN_ATTR_FINGERPRINT)
    return tf_error__set(TF_EINVALID, "attribute 0x%04x: use tf_stun_msg_add_integrity / _add_fingerprint", type);
  if (msg->has_fp) return tf_error__set(TF_EINVALID, "attribute 0x%04x: the message is complete (FINGERPRINT)", type);
  if (msg->has_mi)
    return tf_error__set(TF_EINVALID, "attribute 0x%04x: only FINGERPRINT may follow MESSAGE-INTEGRITY", type);
  int first_error = type == TF_STUN_ATTR_ERROR_CODE && !tf_stun__first(msg, type);
  tf_err rc = tf_stun__append(msg, type, value, len);
  if (rc < 0) return rc;
  if (first_error) {
    rc = tf_stun__cache_reason(msg, &msg->attrs[msg->nattrs - 1]);
    if (rc < 0) {
      /* undo: nothing half-applied */
      msg->nattrs--;
      msg->len = msg->attrs[msg->nattrs].off;
      tf_stun__put16(msg->buf + 2, (uint16_t)(msg->len - TF_STUN__HEADER));
      return rc;
    }
  }
  return TF_OK;
}

tf_err tf_stun_msg_add_u32(tf_stun_msg *msg, uint16_t type, uint32_t value)
{
  uint8_t v[4];
  tf_stun__put32(v, value);
  return tf_stun_msg_add(msg, type, v, sizeof(v));
}

tf_err tf_stun_msg_add_xor_address(tf_stun_msg *msg, uint16_t type, const tf_addr *addr, uint16_t port)
{
  TF_ASSERT_ARG(msg);
  TF_ASSERT_ARG(addr);
  if (addr->family != TF_AF_INET && addr->family != TF_AF_INET6)
    return tf_error__set(TF_EINVALID, "addr: family %u is not 4 or 6", addr->family);
  uint8_t v[20], mask[16];
  size_t alen = addr->family == TF_AF_INET ? 4 : 16;
  tf_stun__put32(mask, TF_STUN__COOKIE);
  memcpy(mask + 4, msg->buf + 8, TF_STUN_TID_SIZE);
  v[0] = 0;
  v[1] = addr->family == TF_AF_INET ? 1 : 2;
  tf_stun__put16(v + 2, (uint16_t)(port ^ (TF_STUN__COOKIE >> 16)));
  for (size_t i = 0; i < alen; i++) v[4 + i] = (uint8_t)(addr->bytes[i] ^ mask[i]);
  return tf_stun_msg_add(msg, type, v, 4 + alen);
}

tf_err tf_stun__msg_add_integrity_mac(tf_stun_msg *msg, const tf_mac *key)
{
  if (msg->has_mi || msg->has_fp)
    return tf_error__set(TF_EINVALID, "MESSAGE-INTEGRITY: the message already has %s",
                         msg->has_fp ? "FINGERPRINT" : "MESSAGE-INTEGRITY");
  if (msg->nattrs == TF_STUN_MAX_ATTRIBUTES || 4 + TF_STUN__MI_SIZE > TF_STUN_MAX_MESSAGE - msg->len)
    return tf_error__set(TF_EBUFS, "MESSAGE-INTEGRITY: the message is full");
  uint8_t mac[TF_STUN__MI_SIZE];
  tf_stun__hmac(mac, msg->buf, msg->len, key);
  tf_err rc = tf_stun__append(msg, TF_STUN_ATTR_MESSAGE_INTEGRITY, mac, sizeof(mac)); /* sent: not secret */
  if (rc < 0) return rc;
  msg->has_mi = 1;
  return TF_OK;
}

tf_err tf_stun_msg_add_integrity(tf_stun_msg *msg, const uint8_t *key, size_t key_len)
{
  TF_ASSERT_ARG(msg);
  TF_ASSERT_ARG(key);
  TF_ASSERT_ARG(key_len > 0);
  tf_mac mac;
  tf_mac__init(&mac, key, key_len);
  tf_err rc = tf_stun__msg_add_integrity_mac(msg, &mac);
  tf_mac__wipe(&mac);
  return rc;
}

tf_err tf_stun_msg_add_fingerprint(tf_stun_msg *msg)
{
  TF_ASSERT_ARG(msg);
  if (msg->has_fp) return tf_error__set(TF_EINVALID, "FINGERPRINT: the message already has one");
  if (msg->nattrs == TF_STUN_MAX_ATTRIBUTES || 8 > TF_STUN_MAX_MESSAGE - msg->len)
    return tf_error__set(TF_EBUFS, "FINGERPRINT: the message is full");
  /* the CRC covers the header with the length that includes FINGERPRINT */
  tf_stun__put16(msg->buf + 2, (uint16_t)(msg->len + 8 - TF_STUN__HEADER));
  uint8_t v[4];
  tf_stun__put32(v, tf_stun__crc32(msg->buf, msg->len) ^ TF_STUN__FP_XOR);
  tf_err rc = tf_stun__append(msg, TF_STUN_ATTR_FINGERPRINT, v, sizeof(v));
  if (rc < 0) return rc;
  msg->has_fp = 1;
  return TF_OK;
}

/* ---- accessors ---- */

const uint8_t *tf_stun_msg_bytes(const tf_stun_msg *msg, size_t *len)
{
  if (!msg) {
    if (len) *len = 0;
    return NULL;
  }
  if (len) *len = msg->len;
  return msg->buf;
}

int tf_stun_msg_method(const tf_stun_msg *msg) { return msg ? tf_stun__method_of(tf_stun__get16(msg->buf)) : -1; }

int tf_stun_msg_class(const tf_stun_msg *msg) { return msg ? tf_stun__class_of(tf_stun__get16(msg->buf)) : -1; }

const uint8_t *tf_stun_msg_tid(const tf_stun_msg *msg) { return msg ? msg->buf + 8 : NULL; }

size_t tf_stun_msg_attr_count(const tf_stun_msg *msg) { return msg ? msg->nattrs : 0; }

tf_err tf_stun_msg_attr(const tf_stun_msg *msg, size_t i, uint16_t *type, const uint8_t **value, size_t *len)
{
  TF_ASSERT_ARG(msg);
  if (i >= msg->nattrs) return tf_error__set(TF_ENOTFOUND, "attribute %zu: the message has %zu", i, msg->nattrs);
  const struct tf_stun__attr *a = &msg->attrs[i];
  if (type) *type = a->type;
  if (value) *value = tf_stun__value(msg, a);
  if (len) *len = a->len;
  return TF_OK;
}

tf_err tf_stun_msg_find(const tf_stun_msg *msg, uint16_t type, const uint8_t **value, size_t *len)
{
  TF_ASSERT_ARG(msg);
  const struct tf_stun__attr *a = tf_stun__first(msg, type);
  if (!a) return tf_error__set(TF_ENOTFOUND, "attribute 0x%04x: not in the message", type);
  if (value) *value = tf_stun__value(msg, a);
  if (len) *len = a->len;
  return TF_OK;
}

tf_err tf_stun_msg_address(const tf_stun_msg *msg, uint16_t type, size_t n, tf_addr *addr, uint16_t *port)
{
  TF_ASSERT_ARG(msg);
  TF_ASSERT_ARG(tf_stun__is_address_type(type));
  size_t seen = 0;
  for (size_t i = 0; i < msg->nattrs; i++) {
    const struct tf_stun__attr *a = &msg->attrs[i];
    if (a->type != type || seen++ != n) continue;
    const char *code = NULL, *why = NULL;
    if (tf_stun__decode_address(tf_stun__value(msg, a), a->len, msg->buf + 8, tf_stun__is_xor_type(type), addr, port,
                                &code, &why) < 0)
      return tf_stun__reject(TF_EPROTO, code, a->off, why);
    return TF_OK;
  }
  return tf_error__set(TF_ENOTFOUND, "attribute 0x%04x #%zu: not in the message", type, n);
}

tf_err tf_stun_msg_error(const tf_stun_msg *msg, int *code, const char **reason)
{
  TF_ASSERT_ARG(msg);
  const struct tf_stun__attr *a = tf_stun__first(msg, TF_STUN_ATTR_ERROR_CODE);
  if (!a) return tf_error__set(TF_ENOTFOUND, "ERROR-CODE: not in the message");
  if (a->len < 4 || !msg->reason)
    return tf_stun__reject(TF_EPROTO, "BAD_ERROR_CODE_LENGTH", a->off, "ERROR-CODE shorter than 4 bytes");
  const uint8_t *v = tf_stun__value(msg, a);
  if (code) *code = (v[2] & 7) * 100 + v[3];
  if (reason) *reason = msg->reason;
  return TF_OK;
}

tf_err tf_stun_msg_u32(const tf_stun_msg *msg, uint16_t type, uint32_t *value)
{
  TF_ASSERT_ARG(msg);
  const struct tf_stun__attr *a = tf_stun__first(msg, type);
  if (!a) return tf_error__set(TF_ENOTFOUND, "attribute 0x%04x: not in the message", type);
  if (a->len != 4)
    return tf_stun__reject(TF_EPROTO, "BAD_FIXED_LENGTH", a->off, "a 32-bit attribute must be 4 bytes long");
  if (value) *value = tf_stun__get32(tf_stun__value(msg, a));
  return TF_OK;
}

tf_err tf_stun_msg_text(char **out, const tf_stun_msg *msg, uint16_t type)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(msg);
  const struct tf_stun__attr *a = tf_stun__first(msg, type);
  if (!a) return tf_error__set(TF_ENOTFOUND, "attribute 0x%04x: not in the message", type);
  char *s = tf_strndup__((const char *)tf_stun__value(msg, a), a->len);
  if (!s) return tf_error__nomem();
  *out = s;
  return TF_OK;
}

void tf_stun_msg_free(tf_stun_msg *msg)
{
  if (!msg) return;
  tf_stun__release(msg);
}

/* ---- ChannelData and stream framing ---- */

tf_err tf_stun_channel_data_encode(uint8_t *buf, size_t size, size_t *out_len, uint16_t channel, const void *data,
                                   size_t len, int pad)
{
  TF_ASSERT_ARG(buf);
  TF_ASSERT_ARG(out_len);
  TF_ASSERT_ARG(data || len == 0);
  if (channel < 0x4000 || channel > 0x4FFF)
    return tf_error__set(TF_EINVALID, "channel: 0x%04x is outside 0x4000-0x4FFF", channel);
  if (len > 0xFFFF) return tf_error__set(TF_EINVALID, "len: %zu bytes exceed a ChannelData frame (65535)", len);
  size_t total = 4 + len + (pad ? tf_stun__pad4(len) : 0);
  if (total > size) return tf_error__set(TF_EBUFS, "ChannelData needs %zu bytes, buffer has %zu", total, size);
  tf_stun__put16(buf, channel);
  tf_stun__put16(buf + 2, (uint16_t)len);
  if (len) memmove(buf + 4, data, len);
  memset(buf + 4 + len, 0, total - 4 - len);
  *out_len = total;
  return TF_OK;
}

tf_err tf_stun_channel_data_decode(const void *buf, size_t len, uint16_t *channel, const uint8_t **data,
                                   size_t *data_len)
{
  TF_ASSERT_ARG(buf || len == 0);
  const uint8_t *p = buf;
  if (len < 4) return tf_stun__reject(TF_EPROTO, "TRUNCATED_CHANNEL_DATA", len, "shorter than the 4-byte header");
  uint16_t ch = tf_stun__get16(p);
  size_t dl = tf_stun__get16(p + 2);
  if (ch < 0x4000 || ch > 0x4FFF)
    return tf_stun__reject(TF_EPROTO, "BAD_CHANNEL_NUMBER", 0, "channel number outside 0x4000-0x4FFF");
  if (dl > len - 4) return tf_stun__reject(TF_EPROTO, "CHANNEL_DATA_OVERRUN", 2, "length runs past the end");
  if (channel) *channel = ch;
  if (data) *data = p + 4;
  if (data_len) *data_len = dl;
  return TF_OK;
}

tf_err tf_stun_frame_length(const void *buf, size_t len, size_t *frame_len)
{
  TF_ASSERT_ARG(buf || len == 0);
  TF_ASSERT_ARG(frame_len);
  const uint8_t *p = buf;
  if (len < 4) return tf_error__set(TF_EBUFS, "frame header: %zu of 4 bytes available", len);
  size_t n = tf_stun__get16(p + 2);
  switch (p[0] >> 6) {
  case 0:
    if (TF_STUN__HEADER + n > TF_STUN_MAX_MESSAGE)
      return tf_stun__reject(TF_EPROTO, "MESSAGE_TOO_LARGE", 2, "STUN message longer than 4096 bytes");
    *frame_len = TF_STUN__HEADER + n;
    return TF_OK;
  case 1:
    *frame_len = 4 + n + tf_stun__pad4(n);
    return TF_OK;
  default:
    return tf_stun__reject(TF_EPROTO, "NOT_STUN_OR_CHANNEL_DATA", 0, "first bits are neither 00 nor 01");
  }
}
